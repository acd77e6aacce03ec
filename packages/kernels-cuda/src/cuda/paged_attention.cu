// pagedAttention (ops/pagedAttention.ts): split-KV attention of each request's queries over the K/V rows its
// slots name in a pool of either layout, the model dtype or fp8, and the merge of split requests by their
// log-sum-exp. The call's offsets rules are check_segments.cu's, its slot rule check_values.cu's.
#include <stdint.h>

#include <type_traits>

#include "bad_values.cuh"
#include "fp8.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "storage.cuh"

namespace kvkit {
namespace paged {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;
constexpr unsigned kAllLanes = 0xffffffffu;
// Every attention launch is four warps.
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;

template <typename P>
__device__ __forceinline__ long long qIndptrAt(const P& p, long long b) {
  return loadIndex(p.qIndptr, p.indptrAreI64 & 1, b);
}

template <typename P>
__device__ __forceinline__ long long kvIndptrAt(const P& p, long long b) {
  return loadIndex(p.kvIndptr, (p.indptrAreI64 >> 1) & 1, b);
}

// Request b's first piece: kvIndptr[b] / T + b, so its ceil(kvLen / T) pieces end before the next request's first.
template <typename P>
__device__ __forceinline__ long long firstPiece(const P& p, long long b) {
  return kvIndptrAt(p, b) / p.tokensPerSplit + b;
}

/** What one block (piece, pass slot) of one KV head works on: its request, its tokens and its passes of rows. */
struct Work {
  long long qStart, qLen, kvStart, kvLen;
  // The piece's tokens, counted from the request's first.
  long long j0, j1;
  long long piece;
  long long passFirst, passStep;
  // Partial rows for the merge (the request has several pieces and few queries), or out and lse.
  bool split;
};

// Same answer in every thread of the block (the offsets are valid: a call whose check failed never gets here).
__device__ __forceinline__ bool findWork(const PagedAttentionParams& p, long long piece, long long slot, Work& w) {
  const long long B = p.numRequests, T = p.tokensPerSplit;
  if (B <= 0) return false;
  // The request of the piece: the last b whose first piece is at or before it.
  long long lo = 0, hi = B;
  while (hi - lo > 1) {
    const long long mid = (lo + hi) >> 1;
    if (firstPiece(p, mid) <= piece) lo = mid;
    else hi = mid;
  }
  w.kvStart = kvIndptrAt(p, lo);
  w.kvLen = kvIndptrAt(p, lo + 1) - w.kvStart;
  w.qStart = qIndptrAt(p, lo);
  w.qLen = qIndptrAt(p, lo + 1) - w.qStart;
  if (w.qLen <= 0 || w.kvLen <= 0) return false;
  const long long pieces = (w.kvLen + T - 1) / T;
  const long long k = piece - (w.kvStart / T + lo);
  if (k < 0 || k >= pieces) return false;
  w.piece = piece;
  w.split = pieces > 1 && w.qLen <= p.splitQueries;
  if (w.split) {
    w.j0 = k * T;
    w.j1 = min(w.kvLen, w.j0 + T);
    w.passFirst = slot;
    w.passStep = p.passSlots;
  } else {
    // Long requests read all their tokens in each pass; their pieces share out the passes instead.
    w.j0 = 0;
    w.j1 = w.kvLen;
    w.passFirst = k * p.passSlots + slot;
    w.passStep = pieces * p.passSlots;
  }
  return true;
}

/** A block's piece, KV head and pass slot: block (piece · H + head) · passSlots + slot. */
struct BlockOf {
  long long piece, slot;
  int head;
};

__device__ __forceinline__ BlockOf blockOf(const PagedAttentionParams& p) {
  const long long x = blockIdx.x, rest = x / p.passSlots, piece = rest / p.numKvHeads;
  return BlockOf{piece, x - rest * p.passSlots, static_cast<int>(rest - piece * p.numKvHeads)};
}

/** Rows [rowBase, rowBase + rows) of the request's qLen · group (query-major), and the tokens any of them sees. */
struct Pass {
  long long rowBase;
  int rows;
  long long tokenFrom, tokenTo;
};

__device__ __forceinline__ Pass passOf(const PagedAttentionParams& p, const Work& w, long long pass, int rowsPerPass, long long group) {
  Pass s;
  s.rowBase = pass * rowsPerPass;
  s.rows = static_cast<int>(min(static_cast<long long>(rowsPerPass), w.qLen * group - s.rowBase));
  // Rows rise with their query's position, so the first row sees the earliest token and the last the latest.
  const long long firstPosition = w.kvLen - w.qLen + s.rowBase / group;
  const long long lastPosition = w.kvLen - w.qLen + (s.rowBase + s.rows - 1) / group;
  long long from = w.j0, to = w.j1;
  if (p.slidingWindow > 0) from = max(from, firstPosition - p.slidingWindow + 1);
  if (p.causal) to = min(to, lastPosition + 1);
  s.tokenFrom = from;
  s.tokenTo = max(to, from);
  return s;
}

// Whether the query at `position` sees token j (counted from its request's first).
__device__ __forceinline__ bool sees(const PagedAttentionParams& p, long long position, long long j) {
  return (p.causal == 0 || j <= position) && (p.slidingWindow == 0 || j + p.slidingWindow > position);
}

/** q·k to the logit in log2 units: scaled (fp8: by the K scale too), then capped. */
struct Logit {
  float scale;
  float cap;
  __device__ __forceinline__ float operator()(float dot) const {
    if (cap == 0.0f) return dot * scale;
    return cap * tanhf(dot * scale / cap) * kLog2e;
  }
};

__device__ __forceinline__ Logit logitOf(const PagedAttentionParams& p, float kScale) {
  const float scale = static_cast<float>(p.scale) * kScale;
  const float cap = static_cast<float>(p.logitSoftcap);
  return Logit{cap == 0.0f ? scale * kLog2e : scale, cap};
}

// 2^x to about 2 ulp (ex2.approx; results below 2^-126 flush to zero), the softmax's weights in f32.
__device__ __forceinline__ float fastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ float headScale(const float* scale, long long perHead, long long h) {
  return scale == nullptr ? 1.0f : __ldg(scale + (perHead ? h : 0));
}

// Where head h of `slot` starts in the pools (elements), or -1 for a slot outside them (the call is rejected then).
__device__ __forceinline__ long long rowOffset(const PagedAttentionParams& p, long long slot, long long h) {
  if (slot < 0 || slot >= p.slotBelow) return -1;
  return poolElement(p.poolHeadMajor != 0, slot, h, p.numKvHeads, p.headDim, p.poolPageSize);
}

/**
 * Entry i of kvSlots as two 32-bit words (i64: low and high; i32: the entry and 0), one load a word and
 * nothing computed from them here, so nothing waits for the loads until the words are used a tile or a
 * step later (slotOfWords). A slot below 2³¹ inside the pools has a zero second word and a first below
 * slotBelow as unsigned, whatever the dtype.
 */
__device__ __forceinline__ uint2 slotWordsAt(const PagedAttentionParams& p, long long i) {
  const unsigned* at = static_cast<const unsigned*>(p.kvSlots) + (p.slotsAreI64 ? 2 * i : i);
  uint2 words = make_uint2(at[0], 0u);
  if (p.slotsAreI64) words.y = at[1];
  return words;
}

// The words of no token: slot -1 in either dtype.
__device__ __forceinline__ uint2 noSlotWords() { return make_uint2(~0u, ~0u); }

__device__ __forceinline__ long long slotOfWords(const PagedAttentionParams& p, uint2 words) {
  return p.slotsAreI64 ? static_cast<long long>((static_cast<unsigned long long>(words.y) << 32) | words.x) : static_cast<long long>(static_cast<int>(words.x));
}

// The output row of pass row r: out/lse row (n · Hq + hq), or the partial row of the piece.
__device__ __forceinline__ long long outputRow(const PagedAttentionParams& p, const Work& w, long long requestRow, long long group, long long h) {
  const long long i = requestRow / group;
  const long long hq = h * group + (requestRow - i * group);
  return w.split ? (w.piece * p.splitQueries + i) * p.numQoHeads + hq : (w.qStart + i) * p.numQoHeads + hq;
}

/**
 * The pass's rows merged over the four warps that shared its tokens, each warp v having left row r's
 * maximum (log2 units) at tops[v · R + r], its sum at sums[v · R + r] and its values at accs[(v · R + r) ·
 * stride + d]; then written once: out and lse, or the piece's partial row.
 */
template <typename S>
__device__ __forceinline__ void storeMergedRows(const PagedAttentionParams& p, const Work& w, const Pass& s, int R, int stride, const float* accs, const float* tops, const float* sums, float vScale, long long group, long long h) {
  const int Dv = static_cast<int>(p.vHeadDim);
  for (int i = threadIdx.x; i < s.rows * Dv; i += kThreads) {
    const int r = i / Dv, d = i - r * Dv;
    float top = -INFINITY;
    for (int v = 0; v < kWarps; v++) top = fmaxf(top, tops[v * R + r]);
    float total = 0.0f, value = 0.0f;
    if (top != -INFINITY) {
      for (int v = 0; v < kWarps; v++) {
        const float weight = exp2f(tops[v * R + r] - top);
        total += weight * sums[v * R + r];
        value += weight * accs[(v * R + r) * stride + d];
      }
    }
    const float x = total > 0.0f ? value / total * vScale : 0.0f;
    const long long row = outputRow(p, w, s.rowBase + r, group, h);
    if (w.split) p.partialOut[row * Dv + d] = x;
    else static_cast<typename S::Bits*>(p.out)[row * Dv + d] = S::fromFloat(x);
    if (d == 0) {
      const float rowLse = total > 0.0f ? top * kLn2 + logf(total) : -INFINITY;
      if (w.split) p.partialLse[row] = rowLse;
      else p.lse[row] = rowLse;
    }
  }
}

// Tensor-core and async-copy primitives (sm_80 and later).
__device__ __forceinline__ unsigned sharedAddress(const void* at) { return static_cast<unsigned>(__cvta_generic_to_shared(at)); }

__device__ __forceinline__ void loadMatrices(uint32_t (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}

__device__ __forceinline__ void loadMatricesTransposed(uint32_t (&r)[4], unsigned at) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];" : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(at) : "memory");
}

// c += a · b for one m16n8k16 tile, f32 accumulators.
template <typename S>
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same<S, F16>::value) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two values rounded once to S, `low` in the low half (the lower column of an mma fragment).
template <typename S>
__device__ __forceinline__ uint32_t packPair(float low, float high) {
  return static_cast<uint32_t>(S::fromFloat(low)) | (static_cast<uint32_t>(S::fromFloat(high)) << 16);
}

/**
 * Two fp8 codes (the low 16 bits, the first in the low byte) as two values of S, the first in the low half:
 * exactly, as every e4m3 and e5m2 value is an f16 and a bf16. sm_89 and later convert in hardware (to f16,
 * and through f32 to bf16); earlier parts look the codes up in the block's table.
 */
template <typename S>
__device__ __forceinline__ uint32_t decodeCodePair(uint32_t codes, bool e4m3, const typename S::Bits* table) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t halves;
  const unsigned short pair = static_cast<unsigned short>(codes);
  if (e4m3) asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(halves) : "h"(pair));
  else asm("cvt.rn.f16x2.e5m2x2 %0, %1;" : "=r"(halves) : "h"(pair));
  if constexpr (std::is_same<S, F16>::value) {
    return halves;
  } else {
    const float low = F16::toFloat(static_cast<uint16_t>(halves)), high = F16::toFloat(static_cast<uint16_t>(halves >> 16));
    return packPair<S>(low, high);
  }
#else
  return static_cast<uint32_t>(table[codes & 0xffu]) | (static_cast<uint32_t>(table[(codes >> 8) & 0xffu]) << 16);
#endif
}

/**
 * Four fp8 codes (a word, the first in the low byte) as two f16 pairs: codes 0, 1 in .x, codes 2, 3 in .y.
 * The word's halves go to the conversions as they are (no shift to take the high one).
 */
__device__ __forceinline__ uint2 decodeCodeQuad(uint32_t codes, bool e4m3, const F16::Bits* table) {
  uint2 pairs;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (e4m3) asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e4m3x2 %0, lo;\n cvt.rn.f16x2.e4m3x2 %1, hi; }" : "=r"(pairs.x), "=r"(pairs.y) : "r"(codes));
  else asm("{ .reg .b16 lo, hi;\n mov.b32 {lo, hi}, %2;\n cvt.rn.f16x2.e5m2x2 %0, lo;\n cvt.rn.f16x2.e5m2x2 %1, hi; }" : "=r"(pairs.x), "=r"(pairs.y) : "r"(codes));
#else
  pairs.x = decodeCodePair<F16>(codes & 0xffffu, e4m3, table);
  pairs.y = decodeCodePair<F16>(codes >> 16, e4m3, table);
#endif
  return pairs;
}

// 16 bytes into shared memory, the first `bytes` (16 or 0) from global memory, the rest zeros; in flight until waited for.
__device__ __forceinline__ void copyAsync16Bytes(unsigned to, const void* from, unsigned bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(to), "l"(from), "r"(bytes) : "memory");
}

// 16 bytes from global memory into shared memory, in flight until waited for; zeros where !live.
__device__ __forceinline__ void copyAsync16(unsigned to, const void* from, bool live) { copyAsync16Bytes(to, from, live ? 16u : 0u); }

// `bytes` (16, 8 or 4) as copyAsync16 copies 16.
__device__ __forceinline__ void copyAsync(unsigned to, const void* from, int bytes, bool live) {
  const int given = live ? bytes : 0;
  if (bytes == 16) copyAsync16(to, from, live);
  else if (bytes == 8) asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(to), "l"(from), "r"(given) : "memory");
  else asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(to), "l"(from), "r"(given) : "memory");
}

__device__ __forceinline__ void closeCopies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int inFlight>
__device__ __forceinline__ void waitCopies() {
  asm volatile("cp.async.wait_group %0;" ::"n"(inFlight) : "memory");
}

__device__ __forceinline__ void waitAllCopies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Element e of row r in a tile of 16-bit rows of DP elements: 16-byte chunks XOR-swizzled by the row, so the
// eight rows an ldmatrix reads at one column sit in eight different bank groups.
template <int DP>
__device__ __forceinline__ int swizzled(int r, int e) {
  return r * DP + ((((e >> 3) ^ (r & 7)) << 3) | (e & 7));
}

/**
 * Shared-memory layout of a tiles launch (the host sizes it the same way, ops/pagedAttention.ts
 * attentionSharedBytes): the stages (P · (K tile, V tile), rows of DP 16-bit elements, or of DP bytes for
 * fp8 codes), for fp8 the two tiles they are decoded into, and q (queryInShared), all overlapped after the
 * last tile by the warps' partial results; then each stage's row offsets, and fp8's decode table.
 */
template <typename L>
struct TilesLayout {
  static constexpr int kDP = L::kHeadDim, kTN = L::kTileTokens, kP = L::kStages;
  static constexpr int kTile16Bytes = kTN * kDP * 2;
  static constexpr int kOutStride = kDP + 8;  // floats between a warp's partial rows: conflict-free float2 stores
  static constexpr int kMergeBytes = kWarps * 16 * kOutStride * 4 + 2 * kWarps * 16 * 4;
  static constexpr int kQueryBytes = L::kQueryInShared ? L::kRowsPerPass * kDP * 2 : 0;
  int stageTileBytes, stagesBytes, convBytes, bigBytes;
  __device__ __forceinline__ explicit TilesLayout(bool fp8) {
    stageTileBytes = fp8 ? kTN * kDP : kTile16Bytes;
    stagesBytes = kP * 2 * stageTileBytes;
    convBytes = fp8 ? 2 * kTile16Bytes : 0;
    bigBytes = max(stagesBytes + convBytes + kQueryBytes, kMergeBytes);
  }
};

/**
 * A tile's TN rows of DP elements of EB bytes (rowsAt: each row's element offset, -1: zeros) from a 16-byte
 * aligned pool into shared memory, as attendTiles lays them out: each thread keeps one 16-byte chunk and steps
 * rows by a fixed count, so a copy is a row offset, one address and the copy.
 */
template <int DP, int TN, int EB>
__device__ __forceinline__ void copyFullRows(unsigned to, const char* pool, const long long* rowsAt, int tid) {
  constexpr int kChunks = DP * EB / 16, kRowStep = kThreads / kChunks;
  static_assert(kThreads % kChunks == 0 && TN % kRowStep == 0, "rows the block's threads share out evenly");
  const int chunk = tid % kChunks, first = tid / kChunks;
#pragma unroll
  for (int k = 0; k < TN / kRowStep; k++) {
    const int r = first + k * kRowStep;
    const long long at = rowsAt[r];
    const unsigned offset = EB == 1 ? static_cast<unsigned>(r * DP + chunk * 16) : static_cast<unsigned>(2 * swizzled<DP>(r, chunk * 8));
    // All ones where the row has a token, by its sign: the row's address, or the pool's start copying 0 bytes.
    const long long live = ~(at >> 63);
    const char* from = pool + (at & live) * EB + chunk * 16;
    copyAsync16Bytes(to + offset, from, static_cast<unsigned>(live) & 16u);
  }
}

/** The request a block works on, kept in shared memory: read where a pass starts and ends, held in no register between. */
struct RequestState {
  long long qStart, qLen, kvStart, kvLen, j0, j1, piece;
  long long tokenFrom, tokenTo;  // the current pass's
  int split;
};

/**
 * One block: a piece, a KV head and a pass slot (blockOf). Per pass of up to 64 rows (query, head of the
 * group), the rows make rowTiles m16 tiles (1, 2 or 4) and each tile's rows are held by 4 / rowTiles warps that
 * share out every K/V tile's tokens, 16 at a time: S = q·kᵀ on tensor cores, scale, cap and mask, the online
 * softmax per row in f32 (log2 units), then O += p·v. The tiles come through shared memory, P stages deep
 * (cp.async, 16-byte chunks where rows allow); fp8 codes are decoded there (exactly, to S) before the
 * tile is read, and their scales applied to the logits and the output. After the last tile the warps' (m, l,
 * O) are merged in shared memory and each row written once: out/lse, or the piece's partial row.
 */
template <typename S, typename L, bool FULL>
__device__ __forceinline__ void attendTiles(const PagedAttentionParams& p) {
  constexpr int DP = L::kHeadDim, TN = L::kTileTokens, P = L::kStages, RP = L::kRowsPerPass;
  constexpr bool QS = L::kQueryInShared;
  constexpr int KC = DP / 16;
  using Layout = TilesLayout<L>;
  using Bits = typename S::Bits;
  static_assert(L::kThreads == kThreads && RP == 16 * kWarps && TN % 16 == 0 && TN <= kThreads && P >= 2, "tiles launch shape");
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ RequestState state;
  __shared__ long long positions[RP];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  // FULL: rows of DP values for q·k and for out (D = Dv = DP), so every chunk of a row is live.
  const int D = FULL ? DP : static_cast<int>(p.headDim), Dv = FULL ? DP : static_cast<int>(p.vHeadDim);
  // V rows are staged whole; only their first Dv columns are multiplied and stored.
  const int chunks16 = FULL ? KC : (D + 15) >> 4, vChunks16 = FULL ? KC : (Dv + 15) >> 4;
  const bool fp8 = p.poolDType != kPoolModelDType;
  const BlockOf at = blockOf(p);
  const int h = at.head;
  const int group = static_cast<int>(p.numQoHeads / p.numKvHeads);
  int passFirst, passStep, passes;
  {
    Work w;
    if (!findWork(p, at.piece, at.slot, w)) return;
    // Requests of few rows are the decode launch's where it runs beside this one.
    if (w.qLen * group <= p.decodeRows) return;
    passes = static_cast<int>((w.qLen * group + RP - 1) / RP);
    passFirst = static_cast<int>(w.passFirst);
    passStep = static_cast<int>(w.passStep);
    if (tid == 0) {
      state.qStart = w.qStart;
      state.qLen = w.qLen;
      state.kvStart = w.kvStart;
      state.kvLen = w.kvLen;
      state.j0 = w.j0;
      state.j1 = w.j1;
      state.piece = w.piece;
      state.split = w.split ? 1 : 0;
    }
  }

  const Layout layout(fp8);
  const unsigned smemAt = sharedAddress(smem);
  Bits* conv = reinterpret_cast<Bits*>(smem + layout.stagesBytes);
  Bits* qTile = reinterpret_cast<Bits*>(smem + layout.stagesBytes + layout.convBytes);
  long long* rowAt = reinterpret_cast<long long*>(smem + layout.bigBytes);
  Bits* table = reinterpret_cast<Bits*>(rowAt + P * TN);

  // Row geometry: every row starts a multiple of its bytes from the pool's start, so one alignment holds for all.
  const int elementBytes = fp8 ? 1 : 2;
  const int rowBytes = D * elementBytes;
  const unsigned long long bases = reinterpret_cast<unsigned long long>(p.kPool) | reinterpret_cast<unsigned long long>(p.vPool);
  const int chunk = (rowBytes % 16 == 0 && bases % 16 == 0) ? 16 : (rowBytes % 8 == 0 && bases % 8 == 0) ? 8 : (rowBytes % 4 == 0 && bases % 4 == 0) ? 4 : 0;
  const int chunksPerRow = chunk ? rowBytes / chunk : 0;
  const int rawStride = (D + 15) & ~15;

  const bool e4m3 = p.poolDType == kPoolE4m3;
  if (fp8) {
    for (int c = tid; c < 256; c += kThreads) table[c] = S::fromFloat(fp8ToFloat(static_cast<uint32_t>(c), e4m3));
  }
  const float vScale = fp8 ? headScale(p.vScale, p.vScalePerHead, h) : 1.0f;
  const Logit logit = logitOf(p, fp8 ? headScale(p.kScale, p.kScalePerHead, h) : 1.0f);
  __syncthreads();

  for (int pass = passFirst; pass < passes; pass += passStep) {
    // The pass's rows and the tokens any of them sees (rows rise with their query's position).
    const long long qStart = state.qStart, qLen = state.qLen, kvLen = state.kvLen, kvStart = state.kvStart;
    const long long rowBase = static_cast<long long>(pass) * RP;
    const int rows = static_cast<int>(min(static_cast<long long>(RP), qLen * group - rowBase));
    long long tokenFrom = state.j0, tokenTo = state.j1;
    if (p.slidingWindow > 0) tokenFrom = max(tokenFrom, kvLen - qLen + rowBase / group - p.slidingWindow + 1);
    if (p.causal) tokenTo = min(tokenTo, kvLen - qLen + (rowBase + rows - 1) / group + 1);
    tokenTo = max(tokenTo, tokenFrom);
    const int tiles = static_cast<int>((tokenTo - tokenFrom + TN - 1) / TN);
    const int rowTiles = rows > 32 ? 4 : rows > 16 ? 2 : 1;
    const int shares = kWarps / rowTiles;
    const int mt = warp % rowTiles, share = warp / rowTiles;
    const bool active = mt * 16 < rows;

    // q rows of the pass (zeros past its rows and past D), query-major: row r is query r / group, head r % group.
    auto qRow = [&](int r) -> const Bits* {
      const long long row = rowBase + r;
      const long long i = row / group;
      const long long hq = static_cast<long long>(h) * group + (row - i * group);
      return static_cast<const Bits*>(p.q) + (qStart + i) * p.qTokenStride + hq * p.qHeadStride;
    };
    uint32_t qa[QS ? 1 : KC][4];
    if constexpr (QS) {
      for (int e = tid; e < 16 * rowTiles * DP; e += kThreads) {
        const int r = e / DP, d = e - r * DP;
        qTile[swizzled<DP>(r, d)] = r < rows && d < D ? qRow(r)[d] : Bits(0);
      }
    } else {
      const int r0 = mt * 16 + g;
      const Bits* q0 = qRow(r0);
      const Bits* q1 = qRow(r0 + 8);
      const bool live0 = active && r0 < rows, live1 = active && r0 + 8 < rows;
      auto pair = [&](const Bits* q, bool live, int d) -> uint32_t {
        const uint32_t low = live && d < D ? q[d] : 0u;
        const uint32_t high = live && d + 1 < D ? q[d + 1] : 0u;
        return low | (high << 16);
      };
#pragma unroll
      for (int kc = 0; kc < KC; kc++) {
        const int d = kc * 16 + 2 * t4;
        const bool used = kc < chunks16;
        qa[kc][0] = used ? pair(q0, live0, d) : 0u;
        qa[kc][1] = used ? pair(q1, live1, d) : 0u;
        qa[kc][2] = used ? pair(q0, live0, d + 8) : 0u;
        qa[kc][3] = used ? pair(q1, live1, d + 8) : 0u;
      }
    }

    // Zeros where no copy writes (each pass: the merge overwrites them): the columns past D, so padded dot
    // products add nothing, and fp8's row ends. Rows of DP elements have neither.
    if (D != DP) {
      for (int i = tid; i < (layout.stagesBytes + layout.convBytes) / 16; i += kThreads) reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
    }
    if (tid == 0) {
      state.tokenFrom = tokenFrom;
      state.tokenTo = tokenTo;
    }
    if (tid < RP) positions[tid] = kvLen - qLen + (rowBase + tid) / group;
    if (tid < TN) {
#pragma unroll
      for (int st = 0; st < P; st++) {
        const long long j = tokenFrom + st * TN + tid;
        rowAt[st * TN + tid] = j < tokenTo ? rowOffset(p, loadIndex(p.kvSlots, p.slotsAreI64, kvStart + j), h) : -1;
      }
    }
    __syncthreads();

    // Tile `tile`'s K and V rows into stage `stage` (issued, not waited for); rows without a token are zeros.
    // A thread's chunks are i = tid + 128·k: (row, chunk) advance by a fixed step, with a carry, no division.
    const int rowStep = chunk ? kThreads / chunksPerRow : 0, chunkStep = chunk ? kThreads - rowStep * chunksPerRow : 0;
    const int firstRow = chunk ? tid / chunksPerRow : 0, firstChunk = chunk ? tid - firstRow * chunksPerRow : 0;
    auto issue = [&](int stage) {
      const long long* rowsAt = rowAt + stage * TN;
#pragma unroll
      for (int kv = 0; kv < 2; kv++) {
        const char* pool = static_cast<const char*>(kv ? p.vPool : p.kPool);
        const unsigned to = smemAt + static_cast<unsigned>((stage * 2 + kv) * layout.stageTileBytes);
        if (FULL && chunk == 16) {
          if (fp8) copyFullRows<DP, TN, 1>(to, pool, rowsAt, tid);
          else copyFullRows<DP, TN, 2>(to, pool, rowsAt, tid);
        } else if (chunk == 16 && chunkStep == 0) {
          // Rows of 16-byte chunks the block's threads share out evenly: a thread keeps its chunk and steps
          // rows, so each copy is a row offset from shared memory, one address and the copy.
          const int chunkBytes = firstChunk * 16;
          const int rowBytesInTile = fp8 ? rawStride : DP * 2;
          // Rows stepped by a multiple of 8 keep their swizzle (r & 7), so the chunk's place in a row is fixed.
          const int swizzledChunk = fp8 ? chunkBytes : 2 * (swizzled<DP>(firstRow, firstChunk * 8) - firstRow * DP);
          const bool fixedSwizzle = fp8 || (rowStep & 7) == 0;
          for (int r = firstRow; r < TN; r += rowStep) {
            const long long at = rowsAt[r];
            const int offset = fixedSwizzle ? r * rowBytesInTile + swizzledChunk : 2 * swizzled<DP>(r, firstChunk * 8);
            copyAsync16(to + offset, pool + (at >= 0 ? at * elementBytes + chunkBytes : 0), at >= 0);
          }
        } else if (chunk != 0) {
          for (int r = firstRow, c = firstChunk; r < TN;) {
            const long long at = rowsAt[r];
            const int offset = fp8 ? r * rawStride + c * chunk : 2 * swizzled<DP>(r, c * (chunk >> 1));
            copyAsync(to + offset, pool + (at >= 0 ? at * elementBytes + c * chunk : 0), chunk, at >= 0);
            r += rowStep;
            c += chunkStep;
            if (c >= chunksPerRow) {
              c -= chunksPerRow;
              r += 1;
            }
          }
        } else {
          // Rows off 4 bytes: element by element, stored at once.
          unsigned char* into = smem + (stage * 2 + kv) * layout.stageTileBytes;
          for (int i = tid; i < TN * D; i += kThreads) {
            const int r = i / D, e = i - r * D;
            const long long at = rowsAt[r];
            if (fp8) into[r * rawStride + e] = at >= 0 ? reinterpret_cast<const uint8_t*>(pool)[at + e] : 0;
            else reinterpret_cast<Bits*>(into)[swizzled<DP>(r, e)] = at >= 0 ? reinterpret_cast<const Bits*>(pool)[at + e] : Bits(0);
          }
        }
      }
    };
    // fp8: stage `stage`'s codes into the decoded tiles, 16 codes a thread at a time.
    auto decode = [&](int stage) {
      const int perRow = rawStride >> 4;
#pragma unroll
      for (int kv = 0; kv < 2; kv++) {
        const unsigned char* raw = smem + (stage * 2 + kv) * layout.stageTileBytes;
        Bits* into = conv + kv * TN * DP;
        for (int i = tid; i < TN * perRow; i += kThreads) {
          const int r = i / perRow, c = i - r * perRow;
          const uint4 codes = *reinterpret_cast<const uint4*>(raw + r * rawStride + c * 16);
          uint32_t out[8];
#pragma unroll
          for (int k = 0; k < 4; k++) {
            const uint32_t x = word(codes, k);
            out[2 * k] = decodeCodePair<S>(x & 0xffffu, e4m3, table);
            out[2 * k + 1] = decodeCodePair<S>(x >> 16, e4m3, table);
          }
          *reinterpret_cast<uint4*>(into + swizzled<DP>(r, 16 * c)) = make_uint4(out[0], out[1], out[2], out[3]);
          *reinterpret_cast<uint4*>(into + swizzled<DP>(r, 16 * c + 8)) = make_uint4(out[4], out[5], out[6], out[7]);
        }
      }
    };

#pragma unroll
    for (int st = 0; st < P - 1; st++) {
      if (st < tiles) issue(st);
      closeCopies();
    }

    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;
    float o[2 * KC][4];
#pragma unroll
    for (int nt = 0; nt < 2 * KC; nt++) o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
    // Per lane, the ldmatrix row (bytes into a 16-token step) and chunk of K (b operands: tokens × columns), V
    // (transposed) and q (a operand); every such row is 8·i + (lane & 7), so the swizzle is by lane & 7.
    // Chunk 2·kc + x of a row swizzled is (2·kc) ^ (x ^ (lane & 7)), x being 0 or 1.
    const unsigned kLane = static_cast<unsigned>(((lane & 7) + ((lane >> 4) << 3)) * DP * 2), kSwizzle = (((lane >> 3) & 1) ^ (lane & 7)) << 4;
    const unsigned vLane = static_cast<unsigned>(((lane & 7) + (((lane >> 3) & 1) << 3)) * DP * 2), vSwizzle = ((lane >> 4) ^ (lane & 7)) << 4;

    for (int tile = 0; tile < tiles; tile++) {
      const int stage = tile % P;
      if (tile + P - 1 < tiles) issue((tile + P - 1) % P);
      closeCopies();
      // The slot of row tid of the tile P ahead, loaded now and made a row offset after this tile's work.
      const uint2 ahead = tid < TN && state.tokenFrom + (tile + P) * static_cast<long long>(TN) + tid < state.tokenTo
                              ? slotWordsAt(p, state.kvStart + state.tokenFrom + (tile + P) * static_cast<long long>(TN) + tid)
                              : noSlotWords();
      waitCopies<P - 1>();
      if (fp8) {
        __syncthreads();
        decode(stage);
      }
      __syncthreads();

      const unsigned kAt = fp8 ? sharedAddress(conv) : smemAt + static_cast<unsigned>(stage * 2 * layout.stageTileBytes);
      const unsigned vAt = fp8 ? kAt + TN * DP * 2 : kAt + static_cast<unsigned>(layout.stageTileBytes);
      const long long tile0 = state.tokenFrom + static_cast<long long>(tile) * TN;
      const int count = static_cast<int>(min(static_cast<long long>(TN), state.tokenTo - tile0));
      // The tile's tokens each of this lane's two rows sees: [from, to), counted from the tile's first.
      auto seenFrom = [&](long long position) { return p.slidingWindow > 0 ? static_cast<int>(min(max(position - p.slidingWindow + 1 - tile0, 0ll), static_cast<long long>(TN))) : 0; };
      auto seenTo = [&](long long position) { return p.causal ? static_cast<int>(min(max(position + 1 - tile0, 0ll), static_cast<long long>(count))) : count; };
      const long long position0 = positions[mt * 16 + g], position1 = positions[mt * 16 + g + 8];
      const int from0 = seenFrom(position0), to0 = seenTo(position0), from1 = seenFrom(position1), to1 = seenTo(position1);
      if (active) {
        for (int step = share; step * 16 < count; step += shares) {
          const int tok0 = step * 16;
          const unsigned stepBytes = static_cast<unsigned>(tok0 * DP * 2);
          float acc[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
#pragma unroll
          for (int kc = 0; kc < KC; kc++) {
            if (kc < chunks16) {
              uint32_t b[4];
              loadMatrices(b, kAt + stepBytes + kLane + ((32u * kc) ^ kSwizzle));
              if constexpr (QS) {
                uint32_t a[4];
                loadMatrices(a, sharedAddress(qTile) + static_cast<unsigned>(mt * 16 * DP * 2) + vLane + ((32u * kc) ^ vSwizzle));
                mma<S>(acc[0], a, b[0], b[1]);
                mma<S>(acc[1], a, b[2], b[3]);
              } else {
                mma<S>(acc[0], qa[kc], b[0], b[1]);
                mma<S>(acc[1], qa[kc], b[2], b[3]);
              }
            }
          }
          // acc[nt][e]: row g (e < 2) or g + 8, token tok0 + 8·nt + 2·t4 + (e & 1) of the tile.
          if (logit.cap == 0.0f) {
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
              for (int e = 0; e < 4; e++) acc[nt][e] *= logit.scale;
          } else {
#pragma unroll
            for (int nt = 0; nt < 2; nt++)
#pragma unroll
              for (int e = 0; e < 4; e++) acc[nt][e] = logit(acc[nt][e]);
          }
          // Masks only where the step reaches an edge of either row's tokens.
          if (from0 > tok0 || to0 < tok0 + 16 || from1 > tok0 || to1 < tok0 + 16) {
#pragma unroll
            for (int nt = 0; nt < 2; nt++) {
#pragma unroll
              for (int e = 0; e < 4; e++) {
                const int j = tok0 + 8 * nt + 2 * t4 + (e & 1);
                if (!(e < 2 ? j >= from0 && j < to0 : j >= from1 && j < to1)) acc[nt][e] = -INFINITY;
              }
            }
          }
          float top0 = fmaxf(fmaxf(acc[0][0], acc[0][1]), fmaxf(acc[1][0], acc[1][1]));
          float top1 = fmaxf(fmaxf(acc[0][2], acc[0][3]), fmaxf(acc[1][2], acc[1][3]));
          top0 = fmaxf(top0, __shfl_xor_sync(kAllLanes, top0, 1));
          top0 = fmaxf(top0, __shfl_xor_sync(kAllLanes, top0, 2));
          top1 = fmaxf(top1, __shfl_xor_sync(kAllLanes, top1, 1));
          top1 = fmaxf(top1, __shfl_xor_sync(kAllLanes, top1, 2));
          const float next0 = fmaxf(m0, top0), next1 = fmaxf(m1, top1);
          // A row that has seen nothing yet keeps -inf: subtract 0 then, so no inf - inf.
          const float base0 = next0 == -INFINITY ? 0.0f : next0, base1 = next1 == -INFINITY ? 0.0f : next1;
          const float rescale0 = next0 == m0 ? 1.0f : fastExp2(m0 - base0), rescale1 = next1 == m1 ? 1.0f : fastExp2(m1 - base1);
          m0 = next0;
          m1 = next1;
#pragma unroll
          for (int nt = 0; nt < 2; nt++) {
            acc[nt][0] = fastExp2(acc[nt][0] - base0);
            acc[nt][1] = fastExp2(acc[nt][1] - base0);
            acc[nt][2] = fastExp2(acc[nt][2] - base1);
            acc[nt][3] = fastExp2(acc[nt][3] - base1);
          }
          l0 = l0 * rescale0 + ((acc[0][0] + acc[0][1]) + (acc[1][0] + acc[1][1]));
          l1 = l1 * rescale1 + ((acc[0][2] + acc[0][3]) + (acc[1][2] + acc[1][3]));
          if (__any_sync(kAllLanes, rescale0 != 1.0f || rescale1 != 1.0f)) {
#pragma unroll
            for (int nt = 0; nt < 2 * KC; nt++) {
              o[nt][0] *= rescale0;
              o[nt][1] *= rescale0;
              o[nt][2] *= rescale1;
              o[nt][3] *= rescale1;
            }
          }
          // The accumulator of q·kᵀ is, element for element, the a operand of p·v (tokens as its k).
          const uint32_t pa[4] = {packPair<S>(acc[0][0], acc[0][1]), packPair<S>(acc[0][2], acc[0][3]), packPair<S>(acc[1][0], acc[1][1]), packPair<S>(acc[1][2], acc[1][3])};
#pragma unroll
          for (int c = 0; c < KC; c++) {
            if (c < vChunks16) {
              uint32_t b[4];
              loadMatricesTransposed(b, vAt + stepBytes + vLane + ((32u * c) ^ vSwizzle));
              mma<S>(o[2 * c], pa, b[0], b[1]);
              mma<S>(o[2 * c + 1], pa, b[2], b[3]);
            }
          }
        }
      }
      if (tid < TN) rowAt[stage * TN + tid] = rowOffset(p, slotOfWords(p, ahead), h);
      __syncthreads();
    }
    waitAllCopies();
    __syncthreads();

    // The warps' (m, l, O) per row, then each row merged over the warps that share it.
    float* outs = reinterpret_cast<float*>(smem);
    float* tops = outs + kWarps * 16 * Layout::kOutStride;
    float* sums = tops + kWarps * 16;
    if (active) {
      l0 += __shfl_xor_sync(kAllLanes, l0, 1);
      l0 += __shfl_xor_sync(kAllLanes, l0, 2);
      l1 += __shfl_xor_sync(kAllLanes, l1, 1);
      l1 += __shfl_xor_sync(kAllLanes, l1, 2);
      if (t4 == 0) {
        tops[warp * 16 + g] = m0;
        tops[warp * 16 + g + 8] = m1;
        sums[warp * 16 + g] = l0;
        sums[warp * 16 + g + 8] = l1;
      }
      float* mine = outs + warp * 16 * Layout::kOutStride;
#pragma unroll
      for (int nt = 0; nt < 2 * KC; nt++) {
        if (nt < 2 * vChunks16) {
          const int col = nt * 8 + 2 * t4;
          *reinterpret_cast<float2*>(mine + g * Layout::kOutStride + col) = make_float2(o[nt][0], o[nt][1]);
          *reinterpret_cast<float2*>(mine + (g + 8) * Layout::kOutStride + col) = make_float2(o[nt][2], o[nt][3]);
        }
      }
    }
    __syncthreads();
    const bool split = state.split != 0;
    const long long outFirst = split ? state.piece * p.splitQueries : state.qStart;
    const long long Hq = p.numQoHeads;
    for (int i = tid; i < rows * Dv; i += kThreads) {
      const int r = i / Dv, d = i - r * Dv;
      const int tileRow = r >> 4, inTile = r & 15;
      float top = -INFINITY;
      for (int sh = 0; sh < shares; sh++) top = fmaxf(top, tops[(tileRow + sh * rowTiles) * 16 + inTile]);
      float total = 0.0f, value = 0.0f;
      if (top != -INFINITY) {
        for (int sh = 0; sh < shares; sh++) {
          const int from = (tileRow + sh * rowTiles) * 16 + inTile;
          const float weight = exp2f(tops[from] - top);
          total += weight * sums[from];
          value += weight * outs[from * Layout::kOutStride + d];
        }
      }
      const float x = total > 0.0f ? value / total * vScale : 0.0f;
      // Row r is query (rowBase + r) / group of the request, head h · group + (rowBase + r) % group.
      const long long requestRow = rowBase + r;
      const long long qi = requestRow / group;
      const long long row = (outFirst + qi) * Hq + static_cast<long long>(h) * group + (requestRow - qi * group);
      if (split) p.partialOut[row * Dv + d] = x;
      else static_cast<Bits*>(p.out)[row * Dv + d] = S::fromFloat(x);
      if (d == 0) {
        const float rowLse = total > 0.0f ? top * kLn2 + logf(total) : -INFINITY;
        if (split) p.partialLse[row] = rowLse;
        else p.lse[row] = rowLse;
      }
    }
    __syncthreads();
  }
}

// d = the transpose of the 8×8 16-bit matrix whose fragment (row lane / 4, columns 2 · (lane % 4) + {0, 1}) is a.
__device__ __forceinline__ uint32_t transposeFragment(uint32_t a) {
  uint32_t d;
  asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;" : "=r"(d) : "r"(a));
  return d;
}

/**
 * Decode and short verification (at most L::kRowsPerPass = 8 rows a pass, the query heads of one KV head
 * for one or two queries), f16/bf16, D up to L::kHeadDim. The operands of the tiles launch swap: each warp
 * computes Sᵀ = K·qᵀ for 16 tokens a step (m16n8k16, K rows as the a operand, the rows as its 8 columns),
 * turns its accumulators into the b operand of Oᵀ += Vᵀ·Pᵀ with one transpose per 8 tokens, and so holds
 * D / 16 · 4 accumulators a lane instead of a 16-row tile's D / 2. A warp takes every fourth 16-token step of
 * the pass's tokens through its own cp.async stages (L::kStages deep), so no barrier of the block falls
 * inside the loop. fp8 codes (FP8) go from the stages straight into the mma operands (no decoded tile):
 * the mmas run in f16, which holds every e4m3 and e5m2 value, q scaled by a power of two into its range and
 * P in f16; K's columns are permuted within each 32 (q's likewise) and V's as the m of Oᵀ, so that a lane
 * reads whole words of codes. The warps' states merge as attendLanes's. Rows are numbered in 32 bits (the
 * host takes this launch where S · H < 2³¹).
 */
template <typename S, typename L, PoolCode POOL, bool FULL>
__device__ __forceinline__ void attendDecodeFrom(const PagedAttentionParams& p, const Work& w, long long h, long long group) {
  constexpr int DP = L::kHeadDim, P = L::kStages, R = L::kRowsPerPass, KC = DP / 16;
  // The pool's codes are a template argument, so each conversion is the one instruction of its kind.
  constexpr bool FP8 = POOL != kPoolModelDType, e4m3 = POOL == kPoolE4m3;
  // Tokens a warp step: the m of the q·kᵀ mma.
  constexpr int TN = 16;
  constexpr int kElementBytes = FP8 ? 1 : 2;
  // Full rows (D = DP) of 16-byte chunks: a lane keeps its chunk and copies every kRowStep-th row of a tile.
  constexpr int kChunks = DP * kElementBytes / 16, kRowStep = 32 / kChunks;
  using Bits = typename S::Bits;
  // The mma's operand type: f16 over fp8 codes.
  using M = typename std::conditional<FP8, F16, S>::type;
  static_assert(L::kThreads == kThreads && R == 8 && P >= 2 && kChunks >= 2 && kChunks <= 32, "decode launch shape");
  static_assert(!FP8 || DP == 64 || DP == 128, "fp8 decode geometry");
  // fp8: each lane's run of V codes a token, W = D / 8 bytes at d = W·g (the m of Oᵀ permuted to it).
  constexpr int W = 2 * KC;
  extern __shared__ __align__(16) unsigned char smem[];

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  // FULL: rows of DP values for q·k and for out (D = Dv = DP), so every chunk of a row is live.
  const int D = FULL ? DP : static_cast<int>(p.headDim), Dv = FULL ? DP : static_cast<int>(p.vHeadDim);
  const int chunks16 = FULL ? KC : (D + 15) >> 4, vChunks16 = FULL ? KC : (Dv + 15) >> 4;

  // Per warp: P stages of (K tile, V tile), 16-bit rows of DP elements swizzled, or fp8 rows of DP codes
  // (swizzled as codeAt says). After the last step the block's merge overlaps them.
  constexpr int kTileBytes = TN * DP * kElementBytes;
  constexpr int kWarpBytes = P * 2 * kTileBytes;
  unsigned char* mine = smem + warp * kWarpBytes;
  const unsigned mineAt = sharedAddress(mine);
  constexpr int kStride = DP + 4;  // floats between merged rows: the lanes' stores of one row pair are conflict-free
  float* accs = reinterpret_cast<float*>(smem);
  float* tops = accs + kWarps * R * kStride;
  float* sums = tops + kWarps * R;
  // fp8 before sm_89: the codes' f16 values.
  F16::Bits* table = reinterpret_cast<F16::Bits*>(smem + max(kWarps * kWarpBytes, (kWarps * R * kStride + 2 * kWarps * R) * 4));

  if (FP8) {
    for (int c = tid; c < 256; c += kThreads) table[c] = F16::fromFloat(fp8ToFloat(static_cast<uint32_t>(c), e4m3));
  }
  // Where byte e of fp8 row r of a K or V tile sits: K's 32-byte pieces and V's 16-byte chunks swizzled by
  // row, so that the lanes' word reads of K (rows g, 8 bytes at 8·t4) and of V (rows 2·t4 + x, W bytes at
  // W·g) meet no bank twice (D = 64: V's twice at most).
  auto codeAt = [](bool v, int r, int e) -> unsigned {
    if (v) return static_cast<unsigned>(r * DP + ((((e >> 4) ^ (((r >> 1) & (kChunks / 2 - 1)) << 1))) << 4) + (e & 15));
    return static_cast<unsigned>(r * DP + ((((e >> 5) ^ ((r >> (DP == 64 ? 1 : 0)) & (DP / 32 - 1)))) << 5) + (e & 31));
  };
  const float vScale = FP8 ? headScale(p.vScale, p.vScalePerHead, h) : 1.0f;
  const Logit logit = logitOf(p, FP8 ? headScale(p.kScale, p.kScalePerHead, h) : 1.0f);

  // Rows of D = DP from 16-byte aligned pools take the fixed copy; any other row element by element.
  const unsigned long long bases = reinterpret_cast<unsigned long long>(p.kPool) | reinterpret_cast<unsigned long long>(p.vPool);
  const bool fullRows = D == DP && bases % 16 == 0;
  const int myChunk = lane % kChunks, myRow = lane / kChunks;
  const char* kFrom = static_cast<const char*>(p.kPool) + myChunk * 16;
  const char* vFrom = static_cast<const char*>(p.vPool) + myChunk * 16;
  const unsigned pageSize = static_cast<unsigned>(p.poolPageSize), heads = static_cast<unsigned>(p.numKvHeads);

  // Per lane, the ldmatrix row and chunk of K as the a operand (row-major) and of V read transposed as the
  // a operand of Oᵀ; every such row is 8·i + (lane & 7), so the swizzle is by lane & 7.
  // Chunk 2·c + x swizzles within bits 4-6 of its byte offset, so chunks c and c + 4 sit 128 bytes apart.
  const unsigned kSwizzle = ((lane >> 4) ^ (lane & 7)) << 4, vSwizzle = (((lane >> 3) & 1) ^ (lane & 7)) << 4;
  unsigned kLane[KC < 4 ? KC : 4], vLane[KC < 4 ? KC : 4];
#pragma unroll
  for (int c = 0; c < (KC < 4 ? KC : 4); c++) {
    kLane[c] = static_cast<unsigned>((lane & 15) * DP * 2) + ((32u * c) ^ kSwizzle);
    vLane[c] = static_cast<unsigned>(((lane & 7) + ((lane >> 4) << 3)) * DP * 2) + ((32u * c) ^ vSwizzle);
  }
  const long long passes = (w.qLen * group + R - 1) / R;

  for (long long pass = w.passFirst; pass < passes; pass += w.passStep) {
    const Pass s = passOf(p, w, pass, R, group);
    // The table, and the previous pass's merge done with the memory the stages reuse.
    __syncthreads();
    // Zeros where no copy writes: columns past D, so padded dot products add nothing.
    if (D != DP) {
      for (int i = lane; i < kWarpBytes / 16; i += 32) reinterpret_cast<uint4*>(mine)[i] = make_uint4(0, 0, 0, 0);
      __syncwarp();
    }
    // This lane's two rows (2·t4, 2·t4 + 1) of the Sᵀ columns and Oᵀ accumulators, and q as the b operand
    // (row g, zeros past the pass's rows and past D).
    const int rowA = 2 * t4, rowB = rowA + 1;
    // Token indices from the request's first fit 32 bits (kvSlots is indexed by them).
    const int positionA = static_cast<int>(w.kvLen - w.qLen + (s.rowBase + rowA) / group), positionB = static_cast<int>(w.kvLen - w.qLen + (s.rowBase + rowB) / group);
    const int lowestPosition = static_cast<int>(w.kvLen - w.qLen + s.rowBase / group), highestPosition = static_cast<int>(w.kvLen - w.qLen + (s.rowBase + s.rows - 1) / group);
    const int tokenTo = static_cast<int>(s.tokenTo), window = static_cast<int>(p.slidingWindow);
    const bool causal = p.causal != 0;
    const bool liveA = rowA < s.rows, liveB = rowB < s.rows;
    uint32_t qb[KC][2];
    Logit passLogit = logit;
    {
      const long long row = s.rowBase + g;
      const long long i = row / group;
      const Bits* q = static_cast<const Bits*>(p.q) + (w.qStart + i) * p.qTokenStride + (h * group + (row - i * group)) * p.qHeadStride;
      const bool live = g < s.rows;
      if constexpr (FP8) {
        // Column 2·t4 + x of step kc is element 32·(kc / 2) + 8·t4 + 4·(kc % 2) + x, column 2·t4 + 8 + x
        // the one 2 past it (the order K's codes are read in); bf16 q scaled by 2^-k below 2^15 for f16.
        float v[KC][4];
        float top = 0.0f;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
#pragma unroll
          for (int x = 0; x < 4; x++) {
            const int d = 32 * (kc >> 1) + 8 * t4 + 4 * (kc & 1) + x;
            v[kc][x] = live && d < D ? S::toFloat(q[d]) : 0.0f;
            top = fmaxf(top, fabsf(v[kc][x]));
          }
        }
        float qScale = 1.0f;
        if constexpr (!std::is_same<S, F16>::value) {
#pragma unroll
          for (int x = 1; x < 32; x <<= 1) top = fmaxf(top, __shfl_xor_sync(kAllLanes, top, x));
          const int e = static_cast<int>((__float_as_uint(top) >> 23) & 0xffu) - 127;
          if (e >= 15) qScale = __uint_as_float(static_cast<unsigned>(127 + 14 - e) << 23);
        }
        passLogit.scale /= qScale;
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
          qb[kc][0] = packPair<F16>(v[kc][0] * qScale, v[kc][1] * qScale);
          qb[kc][1] = packPair<F16>(v[kc][2] * qScale, v[kc][3] * qScale);
        }
      } else {
        auto pair = [&](int d) -> uint32_t {
          const uint32_t low = live && d < D ? q[d] : 0u;
          const uint32_t high = live && d + 1 < D ? q[d + 1] : 0u;
          return low | (high << 16);
        };
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
          qb[kc][0] = kc < chunks16 ? pair(kc * 16 + 2 * t4) : 0u;
          qb[kc][1] = kc < chunks16 ? pair(kc * 16 + 8 + 2 * t4) : 0u;
        }
      }
    }

    // The warp's steps: tokens tokenFrom + 16 · (warp + 4 · i).
    const long long span = s.tokenTo - s.tokenFrom;
    const int steps = static_cast<int>((span + TN - 1) / TN);
    const int mySteps = steps > warp ? (steps - warp + kWarps - 1) / kWarps : 0;
    auto stepFirst = [&](int i) { return s.tokenFrom + static_cast<long long>(warp + kWarps * i) * TN; };
    // Lane t < 16: the slot of token t of step i, as its words (slotWordsAt).
    auto slotOf = [&](int i) -> uint2 {
      const long long j = stepFirst(i) + lane;
      return lane < TN && i < mySteps && j < s.tokenTo ? slotWordsAt(p, w.kvStart + j) : noSlotWords();
    };
    // Its row number in the pools (-1: none, or a slot outside them, whose call is rejected; slotBelow < 2³¹).
    auto rowOf = [&](uint2 slot) -> int {
      if (slot.y != 0u || slot.x >= static_cast<unsigned>(p.slotBelow)) return -1;
      const unsigned at = slot.x;
      if (p.poolHeadMajor == 0) return static_cast<int>(at * heads + static_cast<unsigned>(h));
      const unsigned page = at / pageSize;
      return static_cast<int>((page * heads + static_cast<unsigned>(h)) * pageSize + (at - page * pageSize));
    };
    // A step's K and V rows into `stage` (issued, not waited for), lane t < 16 holding row t's number; rows
    // without a token are zeros.
    auto issue = [&](int stage, int rowAt) {
      const unsigned to = mineAt + static_cast<unsigned>(stage * 2 * kTileBytes);
      if (fullRows) {
#pragma unroll
        for (int k = 0; k < TN / kRowStep; k++) {
          const int r = myRow + k * kRowStep;
          const int row = __shfl_sync(kAllLanes, rowAt, r);
          const unsigned kOffset = FP8 ? codeAt(false, r, myChunk * 16) : static_cast<unsigned>(2 * swizzled<DP>(r, myChunk * 8));
          const unsigned vOffset = FP8 ? codeAt(true, r, myChunk * 16) : kOffset;
          const unsigned long long bytes = static_cast<unsigned long long>(row >= 0 ? row : 0) * (DP * kElementBytes);
          copyAsync16(to + kOffset, kFrom + bytes, row >= 0);
          copyAsync16(to + kTileBytes + vOffset, vFrom + bytes, row >= 0);
        }
      } else {
        // Rows shorter than DP (their padding stays zero) or pools off 16 bytes: element by element, zeros
        // for rows without a token.
        unsigned char* into = mine + stage * 2 * kTileBytes;
        for (int r = 0; r < TN; r++) {
          const int row = __shfl_sync(kAllLanes, rowAt, r);
          const long long at = static_cast<long long>(row) * D;
          for (int e = lane; e < D; e += 32) {
#pragma unroll
            for (int kv = 0; kv < 2; kv++) {
              const void* pool = kv ? p.vPool : p.kPool;
              if (FP8) into[kv * kTileBytes + codeAt(kv == 1, r, e)] = row >= 0 ? static_cast<const uint8_t*>(pool)[at + e] : 0;
              else reinterpret_cast<Bits*>(into + kv * kTileBytes)[swizzled<DP>(r, e)] = row >= 0 ? static_cast<const Bits*>(pool)[at + e] : Bits(0);
            }
          }
        }
      }
    };
#pragma unroll
    for (int i = 0; i < P - 1; i++) {
      if (i < mySteps) issue(i, rowOf(slotOf(i)));
      closeCopies();
    }
    uint2 ahead = slotOf(P - 1);

    float mA = -INFINITY, mB = -INFINITY, lA = 0.0f, lB = 0.0f;
    float o[KC][4];
#pragma unroll
    for (int mt = 0; mt < KC; mt++) o[mt][0] = o[mt][1] = o[mt][2] = o[mt][3] = 0.0f;

    for (int i = 0, stage = 0, next = P - 1; i < mySteps; i++) {
      // Step i + P - 1 into the stage step i - 1 used (the warp left it at the end of that step).
      if (i + P - 1 < mySteps) issue(next, rowOf(ahead));
      closeCopies();
      ahead = slotOf(i + P);
      next = next == P - 1 ? 0 : next + 1;
      waitCopies<P - 1>();
      __syncwarp();
      const unsigned kAt = mineAt + static_cast<unsigned>(stage * 2 * kTileBytes);
      const unsigned vAt = kAt + static_cast<unsigned>(kTileBytes);
      const unsigned char* kCodes = mine + stage * 2 * kTileBytes;
      const unsigned char* vCodes = kCodes + kTileBytes;
      stage = stage == P - 1 ? 0 : stage + 1;

      // Sᵀ: c[0] (token g, row A), c[1] (token g, row B), c[2] and c[3] token g + 8.
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f}, c2[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if constexpr (FP8) {
        // Per 32 codes of rows g and g + 8, the lane's 8 at 8·t4: the a operands of two steps, whose
        // columns 2·t4, 2·t4 + 1 are its codes 0, 1 (then 4, 5) and columns 2·t4 + 8, + 9 its codes 2, 3 (6, 7).
#pragma unroll
        for (int c32 = 0; c32 < KC / 2; c32++) {
          const uint2 top = *reinterpret_cast<const uint2*>(kCodes + codeAt(false, g, 32 * c32 + 8 * t4));
          const uint2 low = *reinterpret_cast<const uint2*>(kCodes + codeAt(false, g + 8, 32 * c32 + 8 * t4));
          const uint2 t0 = decodeCodeQuad(top.x, e4m3, table), l0 = decodeCodeQuad(low.x, e4m3, table);
          const uint2 t1 = decodeCodeQuad(top.y, e4m3, table), l1 = decodeCodeQuad(low.y, e4m3, table);
          const uint32_t a0[4] = {t0.x, l0.x, t0.y, l0.y}, a1[4] = {t1.x, l1.x, t1.y, l1.y};
          mma<F16>(c, a0, qb[2 * c32][0], qb[2 * c32][1]);
          mma<F16>(c2, a1, qb[2 * c32 + 1][0], qb[2 * c32 + 1][1]);
        }
      } else {
#pragma unroll
        for (int kc = 0; kc < KC; kc++) {
          if (kc < chunks16) {
            uint32_t a[4];
            loadMatrices(a, kAt + kLane[kc & 3] + 128u * (kc >> 2));
            // Two chains of mma, even and odd chunks, so each waits on half as many.
            mma<S>(kc & 1 ? c2 : c, a, qb[kc][0], qb[kc][1]);
          }
        }
      }
      if (passLogit.cap == 0.0f) {
#pragma unroll
        for (int e = 0; e < 4; e++) c[e] = (c[e] + c2[e]) * passLogit.scale;
      } else {
#pragma unroll
        for (int e = 0; e < 4; e++) c[e] = passLogit(c[e] + c2[e]);
      }
      // Masks where the step reaches past the pass's tokens or into some row's causal or window edge;
      // the rows past the pass's never count.
      const int first = static_cast<int>(stepFirst(i));
      if (first + TN > tokenTo || (causal && first + TN - 1 > lowestPosition) || (window > 0 && first + window <= highestPosition)) {
        const int j0 = first + g, j1 = j0 + 8;
        auto seen = [&](int j, int position) { return j < tokenTo && (!causal || j <= position) && (window == 0 || j + window > position); };
        if (!seen(j0, positionA)) c[0] = -INFINITY;
        if (!seen(j0, positionB)) c[1] = -INFINITY;
        if (!seen(j1, positionA)) c[2] = -INFINITY;
        if (!seen(j1, positionB)) c[3] = -INFINITY;
      }
      if (!liveA) c[0] = c[2] = -INFINITY;
      if (!liveB) c[1] = c[3] = -INFINITY;
      // Each row's maximum over the step's 16 tokens: over g, the lanes that share t4.
      float topA = fmaxf(c[0], c[2]), topB = fmaxf(c[1], c[3]);
#pragma unroll
      for (int x = 4; x <= 16; x <<= 1) {
        topA = fmaxf(topA, __shfl_xor_sync(kAllLanes, topA, x));
        topB = fmaxf(topB, __shfl_xor_sync(kAllLanes, topB, x));
      }
      const float nextA = fmaxf(mA, topA), nextB = fmaxf(mB, topB);
      const float baseA = nextA == -INFINITY ? 0.0f : nextA, baseB = nextB == -INFINITY ? 0.0f : nextB;
      // An unchanged maximum rescales nothing (rows past the pass's stay at -inf throughout).
      const float rescaleA = nextA == mA ? 1.0f : fastExp2(mA - baseA), rescaleB = nextB == mB ? 1.0f : fastExp2(mB - baseB);
      mA = nextA;
      mB = nextB;
      c[0] = fastExp2(c[0] - baseA);
      c[1] = fastExp2(c[1] - baseB);
      c[2] = fastExp2(c[2] - baseA);
      c[3] = fastExp2(c[3] - baseB);
      // The lane's share of each row's sum; the lanes of a row add theirs at the end.
      lA = lA * rescaleA + (c[0] + c[2]);
      lB = lB * rescaleB + (c[1] + c[3]);
      if (__any_sync(kAllLanes, rescaleA != 1.0f || rescaleB != 1.0f)) {
#pragma unroll
        for (int mt = 0; mt < KC; mt++) {
          o[mt][0] *= rescaleA;
          o[mt][1] *= rescaleB;
          o[mt][2] *= rescaleA;
          o[mt][3] *= rescaleB;
        }
      }
      // Pᵀ as the b operand: tokens 2·t4, 2·t4 + 1 (and + 8) of row g, the accumulators transposed.
      const uint32_t pb0 = transposeFragment(packPair<M>(c[0], c[1])), pb1 = transposeFragment(packPair<M>(c[2], c[3]));
      if constexpr (FP8) {
        // Tokens 2·t4 + {0, 1, 8, 9}: each the lane's W codes at d = W·g, words [0, W / 8) the m rows g of
        // m tiles 4·word + byte, the rest rows g + 8; a byte of two tokens side by side is one f16 pair.
        uint32_t x[4][W / 4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
          const int r = 2 * t4 + (k & 1) + 8 * (k >> 1);
          const unsigned char* at = vCodes + codeAt(true, r, W * g);
          if constexpr (W == 16) {
            const uint4 u = *reinterpret_cast<const uint4*>(at);
            x[k][0] = u.x, x[k][1] = u.y, x[k][2] = u.z, x[k][3] = u.w;
          } else {
            const uint2 u = *reinterpret_cast<const uint2*>(at);
            x[k][0] = u.x, x[k][1] = u.y;
          }
        }
#pragma unroll
        for (int mt = 0; mt < KC; mt += 2) {
          // Bytes mt % 4 and the next of the words of m rows g and g + 8, tokens 2·t4, + 1 and + 8, + 9.
          const unsigned sel = (mt & 2) ? 0x7362u : 0x5140u;
          const int wg = mt >> 2, wg8 = W / 8 + (mt >> 2);
          const uint32_t g0 = __byte_perm(x[0][wg], x[1][wg], sel), g8 = __byte_perm(x[0][wg8], x[1][wg8], sel);
          const uint32_t h0 = __byte_perm(x[2][wg], x[3][wg], sel), h8 = __byte_perm(x[2][wg8], x[3][wg8], sel);
          const uint2 pg0 = decodeCodeQuad(g0, e4m3, table), pg8 = decodeCodeQuad(g8, e4m3, table);
          const uint2 ph0 = decodeCodeQuad(h0, e4m3, table), ph8 = decodeCodeQuad(h8, e4m3, table);
          const uint32_t a0[4] = {pg0.x, pg8.x, ph0.x, ph8.x}, a1[4] = {pg0.y, pg8.y, ph0.y, ph8.y};
          mma<F16>(o[mt], a0, pb0, pb1);
          mma<F16>(o[mt + 1], a1, pb0, pb1);
        }
      } else {
#pragma unroll
        for (int mt = 0; mt < KC; mt++) {
          if (mt < vChunks16) {
            uint32_t a[4];
            loadMatricesTransposed(a, vAt + vLane[mt & 3] + 128u * (mt >> 2));
            mma<S>(o[mt], a, pb0, pb1);
          }
        }
      }
      __syncwarp();
    }
    waitAllCopies();
#pragma unroll
    for (int x = 4; x <= 16; x <<= 1) {
      lA += __shfl_xor_sync(kAllLanes, lA, x);
      lB += __shfl_xor_sync(kAllLanes, lB, x);
    }
    __syncthreads();
    // Oᵀ: o[mt][0] is (d = 16·mt + g, row A), [1] row B, [2] and [3] d + 8; fp8: d = W·g + mt, and + KC.
#pragma unroll
    for (int mt = 0; mt < KC; mt++) {
      if (FP8 || mt < vChunks16) {
        const int d = FP8 ? W * g + mt : 16 * mt + g, d8 = FP8 ? d + KC : d + 8;
        accs[(warp * R + rowA) * kStride + d] = o[mt][0];
        accs[(warp * R + rowB) * kStride + d] = o[mt][1];
        accs[(warp * R + rowA) * kStride + d8] = o[mt][2];
        accs[(warp * R + rowB) * kStride + d8] = o[mt][3];
      }
    }
    if (g == 0) {
      tops[warp * R + rowA] = mA;
      tops[warp * R + rowB] = mB;
      sums[warp * R + rowA] = lA;
      sums[warp * R + rowB] = lB;
    }
    __syncthreads();
    storeMergedRows<S>(p, w, s, R, kStride, accs, tops, sums, vScale, group, h);
  }
}

template <typename S, typename L>
__device__ __forceinline__ void attendDecode(const PagedAttentionParams& p) {
  const BlockOf at = blockOf(p);
  const long long group = p.numQoHeads / p.numKvHeads;
  Work w;
  if (!findWork(p, at.piece, at.slot, w)) return;
  if (w.qLen * group > p.decodeRows) return;
  const bool full = p.headDim == L::kHeadDim && p.vHeadDim == L::kHeadDim;
  if (p.poolDType == kPoolE4m3) {
    if (full) attendDecodeFrom<S, L, kPoolE4m3, true>(p, w, at.head, group);
    else attendDecodeFrom<S, L, kPoolE4m3, false>(p, w, at.head, group);
  } else if (p.poolDType == kPoolE5m2) {
    if (full) attendDecodeFrom<S, L, kPoolE5m2, true>(p, w, at.head, group);
    else attendDecodeFrom<S, L, kPoolE5m2, false>(p, w, at.head, group);
  } else {
    if (full) attendDecodeFrom<S, L, kPoolModelDType, true>(p, w, at.head, group);
    else attendDecodeFrom<S, L, kPoolModelDType, false>(p, w, at.head, group);
  }
}

/**
 * On CUDA cores (f32 queries, and rows past the tiles' 256, MLA's latent rows), any pool dtype: each warp
 * takes every fourth step of U tokens of the piece, its lanes holding elements lane, lane + 32, ... of a row
 * in f32; R rows a pass, each lane their q elements; the U K rows and the first Dv values of the U V rows of
 * a step are loaded together, the R · U dot products reduced across the warp, then the online softmax (the
 * same in every lane) and acc += p · v. The four warps' states are merged in shared memory.
 */
template <typename S, typename L>
__device__ __forceinline__ void attendLanes(const PagedAttentionParams& p) {
  using Bits = typename S::Bits;
  constexpr int DP = L::kHeadDim, R = L::kRowsPerPass, U = L::kTokensPerStep, KD = DP / 32;
  static_assert(L::kThreads == kThreads, "lanes launch shape");
  extern __shared__ __align__(16) unsigned char smem[];
  float* accs = reinterpret_cast<float*>(smem);
  float* tops = accs + kWarps * R * DP;
  float* sums = tops + kWarps * R;
  float* table = sums + kWarps * R;

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int D = static_cast<int>(p.headDim), Dv = static_cast<int>(p.vHeadDim);
  const bool fp8 = p.poolDType != kPoolModelDType;
  const long long H = p.numKvHeads, Hq = p.numQoHeads, group = Hq / H;
  const BlockOf at = blockOf(p);
  const long long h = at.head;
  Work w;
  if (!findWork(p, at.piece, at.slot, w)) return;
  if (fp8) {
    for (int c = tid; c < 256; c += kThreads) table[c] = fp8ToFloat(static_cast<uint32_t>(c), p.poolDType == kPoolE4m3);
    __syncthreads();
  }
  const float vScale = fp8 ? headScale(p.vScale, p.vScalePerHead, h) : 1.0f;
  const Logit logit = logitOf(p, fp8 ? headScale(p.kScale, p.kScalePerHead, h) : 1.0f);
  auto poolValue = [&](const void* pool, long long at) -> float {
    return fp8 ? table[static_cast<const uint8_t*>(pool)[at]] : S::toFloat(static_cast<const Bits*>(pool)[at]);
  };
  const long long passes = (w.qLen * group + R - 1) / R;

  for (long long pass = w.passFirst; pass < passes; pass += w.passStep) {
    const Pass s = passOf(p, w, pass, R, group);
    float q[R][KD], acc[R][KD], m[R], l[R];
    long long position[R];
#pragma unroll
    for (int r = 0; r < R; r++) {
      const long long row = s.rowBase + r;
      const long long i = row / group;
      const long long hq = h * group + (row - i * group);
      position[r] = w.kvLen - w.qLen + i;
      const Bits* qRow = static_cast<const Bits*>(p.q) + (w.qStart + i) * p.qTokenStride + hq * p.qHeadStride;
#pragma unroll
      for (int k = 0; k < KD; k++) {
        const int d = lane + 32 * k;
        q[r][k] = r < s.rows && d < D ? S::toFloat(qRow[d]) : 0.0f;
        acc[r][k] = 0.0f;
      }
      m[r] = -INFINITY;
      l[r] = 0.0f;
    }
    for (long long j = s.tokenFrom + warp * U; j < s.tokenTo; j += kWarps * U) {
      float kx[U][KD], vx[U][KD];
#pragma unroll
      for (int u = 0; u < U; u++) {
        const long long at = j + u < s.tokenTo ? rowOffset(p, loadIndex(p.kvSlots, p.slotsAreI64, w.kvStart + j + u), h) : -1;
#pragma unroll
        for (int k = 0; k < KD; k++) {
          const int d = lane + 32 * k;
          kx[u][k] = at >= 0 && d < D ? poolValue(p.kPool, at + d) : 0.0f;
          vx[u][k] = at >= 0 && d < Dv ? poolValue(p.vPool, at + d) : 0.0f;
        }
      }
      float dot[R][U];
#pragma unroll
      for (int r = 0; r < R; r++) {
#pragma unroll
        for (int u = 0; u < U; u++) {
          float x = 0.0f;
#pragma unroll
          for (int k = 0; k < KD; k++) x = fmaf(q[r][k], kx[u][k], x);
          dot[r][u] = x;
        }
      }
#pragma unroll
      for (int step = 16; step >= 1; step >>= 1) {
#pragma unroll
        for (int r = 0; r < R; r++)
#pragma unroll
          for (int u = 0; u < U; u++) dot[r][u] += __shfl_xor_sync(kAllLanes, dot[r][u], step);
      }
#pragma unroll
      for (int r = 0; r < R; r++) {
        float top = -INFINITY;
#pragma unroll
        for (int u = 0; u < U; u++) {
          dot[r][u] = j + u < s.tokenTo && sees(p, position[r], j + u) ? logit(dot[r][u]) : -INFINITY;
          top = fmaxf(top, dot[r][u]);
        }
        const float next = fmaxf(m[r], top);
        const float base = next == -INFINITY ? 0.0f : next;
        const float rescale = exp2f(m[r] - base);
        m[r] = next;
        float sum = 0.0f;
#pragma unroll
        for (int u = 0; u < U; u++) {
          dot[r][u] = exp2f(dot[r][u] - base);
          sum += dot[r][u];
        }
        l[r] = l[r] * rescale + sum;
#pragma unroll
        for (int k = 0; k < KD; k++) {
          float x = acc[r][k] * rescale;
#pragma unroll
          for (int u = 0; u < U; u++) x = fmaf(dot[r][u], vx[u][k], x);
          acc[r][k] = x;
        }
      }
    }
#pragma unroll
    for (int r = 0; r < R; r++) {
#pragma unroll
      for (int k = 0; k < KD; k++) accs[(warp * R + r) * DP + lane + 32 * k] = acc[r][k];
      if (lane == 0) {
        tops[warp * R + r] = m[r];
        sums[warp * R + r] = l[r];
      }
    }
    __syncthreads();
    storeMergedRows<S>(p, w, s, R, DP, accs, tops, sums, vScale, group, h);
    __syncthreads();
  }
}

/** A warp per (query, query head) of a split request: its pieces' partial rows merged by their log-sum-exp. */
template <typename S>
__device__ __forceinline__ void mergeSplits(const PagedAttentionMergeParams& p) {
  const int lane = threadIdx.x & 31;
  const long long Hq = p.numQoHeads, D = p.vHeadDim, T = p.tokensPerSplit, Q = p.splitQueries;
  const long long row = static_cast<long long>(blockIdx.x) * (blockDim.x >> 5) + (threadIdx.x >> 5);
  if (row >= p.numTokens * Hq || p.numRequests <= 0) return;
  const long long n = row / Hq, hq = row - n * Hq;
  // The request of query n: the last b with qIndptr[b] <= n (requests without queries share their offset with the next).
  long long lo = 0, hi = p.numRequests;
  while (hi - lo > 1) {
    const long long mid = (lo + hi) >> 1;
    if (qIndptrAt(p, mid) <= n) lo = mid;
    else hi = mid;
  }
  const long long qStart = qIndptrAt(p, lo), qLen = qIndptrAt(p, lo + 1) - qStart;
  const long long kvStart = kvIndptrAt(p, lo), kvLen = kvIndptrAt(p, lo + 1) - kvStart;
  const long long pieces = kvLen > 0 ? (kvLen + T - 1) / T : 0;
  if (pieces <= 1 || qLen > Q) return;
  const long long first = kvStart / T + lo, i = n - qStart;
  auto partialRow = [&](long long k) { return ((first + k) * Q + i) * Hq + hq; };
  float top = -INFINITY;
  for (long long k = lane; k < pieces; k += 32) top = fmaxf(top, p.partialLse[partialRow(k)]);
#pragma unroll
  for (int step = 16; step >= 1; step >>= 1) top = fmaxf(top, __shfl_xor_sync(kAllLanes, top, step));
  float total = 0.0f;
  if (top != -INFINITY) {
    for (long long k = lane; k < pieces; k += 32) total += expf(p.partialLse[partialRow(k)] - top);
  }
#pragma unroll
  for (int step = 16; step >= 1; step >>= 1) total += __shfl_xor_sync(kAllLanes, total, step);
  for (long long d = lane; d < D; d += 32) {
    float x = 0.0f;
    if (total > 0.0f) {
      for (long long k = 0; k < pieces; k++) {
        const long long at = partialRow(k);
        x = fmaf(expf(p.partialLse[at] - top), p.partialOut[at * D + d], x);
      }
      x /= total;
    }
    static_cast<typename S::Bits*>(p.out)[row * D + d] = S::fromFloat(x);
  }
  if (lane == 0) p.lse[row] = total > 0.0f ? top + logf(total) : -INFINITY;
}

}  // namespace paged
}  // namespace kvkit

using kvkit::PagedAttentionMergeParams;
using kvkit::PagedAttentionParams;

// Launched behind check_segments (which waits for the call's value check): each block waits for it, lets the
// merge (or the next op) launch, and reads the verdict before anything else.
#define KVKIT_PAGED_TILES(name, S, L)                                                                                         \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) paged_attention_##name(const PagedAttentionParams p) { \
    kvkit::waitForPreviousGrid();                                                                                             \
    kvkit::letNextGridLaunch();                                                                                               \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                      \
    if (p.headDim == L::kHeadDim && p.vHeadDim == L::kHeadDim) kvkit::paged::attendTiles<S, L, true>(p);                       \
    else kvkit::paged::attendTiles<S, L, false>(p);                                                                           \
  }
#define KVKIT_PAGED_DECODE(name, S, L)                                                                                         \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) paged_attention_##name(const PagedAttentionParams p) { \
    kvkit::waitForPreviousGrid();                                                                                             \
    kvkit::letNextGridLaunch();                                                                                               \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                      \
    kvkit::paged::attendDecode<S, L>(p);                                                                                      \
  }
#define KVKIT_PAGED_LANES(name, S, L)                                                                                          \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) paged_attention_##name(const PagedAttentionParams p) { \
    kvkit::waitForPreviousGrid();                                                                                             \
    kvkit::letNextGridLaunch();                                                                                               \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                      \
    kvkit::paged::attendLanes<S, L>(p);                                                                                       \
  }

KVKIT_PAGED_TILES(f16_d64, kvkit::F16, kvkit::PagedAttentionTiles64Launch)
KVKIT_PAGED_TILES(f16_d128, kvkit::F16, kvkit::PagedAttentionTiles128Launch)
KVKIT_PAGED_TILES(f16_d256, kvkit::F16, kvkit::PagedAttentionTiles256Launch)
KVKIT_PAGED_TILES(bf16_d64, kvkit::Bf16, kvkit::PagedAttentionTiles64Launch)
KVKIT_PAGED_TILES(bf16_d128, kvkit::Bf16, kvkit::PagedAttentionTiles128Launch)
KVKIT_PAGED_TILES(bf16_d256, kvkit::Bf16, kvkit::PagedAttentionTiles256Launch)
KVKIT_PAGED_DECODE(f16_decode64, kvkit::F16, kvkit::PagedAttentionDecode64Launch)
KVKIT_PAGED_DECODE(f16_decode128, kvkit::F16, kvkit::PagedAttentionDecode128Launch)
KVKIT_PAGED_DECODE(bf16_decode64, kvkit::Bf16, kvkit::PagedAttentionDecode64Launch)
KVKIT_PAGED_DECODE(bf16_decode128, kvkit::Bf16, kvkit::PagedAttentionDecode128Launch)
KVKIT_PAGED_LANES(f32_d64, kvkit::F32, kvkit::PagedAttentionLanes64Launch)
KVKIT_PAGED_LANES(f32_d128, kvkit::F32, kvkit::PagedAttentionLanes128Launch)
KVKIT_PAGED_LANES(f32_d256, kvkit::F32, kvkit::PagedAttentionLanes256Launch)
KVKIT_PAGED_LANES(f32_d576, kvkit::F32, kvkit::PagedAttentionLanes576Launch)
KVKIT_PAGED_LANES(f16_d576, kvkit::F16, kvkit::PagedAttentionLanes576Launch)
KVKIT_PAGED_LANES(bf16_d576, kvkit::Bf16, kvkit::PagedAttentionLanes576Launch)

#define KVKIT_PAGED_MERGE(name, S)                                                                                                 \
  extern "C" __global__ void __launch_bounds__(kvkit::PagedAttentionMergeLaunch::kThreads) paged_attention_merge_##name(const PagedAttentionMergeParams p) { \
    kvkit::waitForPreviousGrid();                                                                                                  \
    kvkit::letNextGridLaunch();                                                                                                    \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                           \
    kvkit::paged::mergeSplits<S>(p);                                                                                               \
  }

KVKIT_PAGED_MERGE(f32, kvkit::F32)
KVKIT_PAGED_MERGE(f16, kvkit::F16)
KVKIT_PAGED_MERGE(bf16, kvkit::Bf16)
