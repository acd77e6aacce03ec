// fusedNormRopeStacked (SEMANTICS.md §1), also the second half of the materializer:
// RMSNorm + RoPE of every K head, V copied bit for bit, [T, L, 2*H*D] -> [L, rows, H, D].
#include "bad_values.cuh"
#include "params.cuh"
#include "rope.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

namespace kvkit {

/**
 * Per token of the block: the output row (-1: not written) and the cos ‖ sin
 * row in shared memory. A bad position or slot is recorded once (by the first
 * block column) and its token skipped; of tokens sharing a slot, only the
 * slot's owner writes.
 */
__device__ __forceinline__ void prepareFusedTokens(const FusedNormRopeParams& p, long long firstToken, int tokens, float* cosSin, long long* outRow) {
  const int R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  for (int i = threadIdx.x; i < tokens * halfR; i += blockDim.x) {
    const int tt = i / halfR;
    const int j = i - tt * halfR;
    const long long t = firstToken + tt;
    const long long position = loadIndex(p.positions, p.positionsAreI64, t);
    const bool positionOk = position >= p.positionMin && position < p.positionBelow;
    if (j == 0) {
      long long row = t;
      bool slotOk = true;
      if (p.slots != nullptr) {
        row = loadIndex(p.slots, p.slotsAreI64, t);
        slotOk = row < p.slotBelow;
        if (blockIdx.y == 0 && !slotOk) recordBadValue(p.badValue, p.slotCheck, t, row);
        if (slotOk && row >= 0 && p.slotOwners != nullptr && !ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, row, t)) row = -1;
      }
      if (blockIdx.y == 0 && !positionOk) recordBadValue(p.badValue, p.positionCheck, t, position);
      outRow[tt] = positionOk && slotOk && row >= 0 ? row : -1;
    }
    float c = 1.0f, s = 0.0f;
    if (positionOk) cosSinAt(position, j, halfR, p.cosSinCache, p.cacheDType, p.ropeFrequencies, c, s);
    cosSin[tt * R + j] = c;
    cosSin[tt * R + halfR + j] = s;
  }
}

// The raw 16-byte vectors of one row's K and V, as loaded: converted only when used, so a prefetch costs few registers.
template <int NV>
struct RowVectors {
  uint4 k[NV];
  uint4 v[NV];
};

/**
 * The fast path: rows whose length is a whole number of 16-byte vectors.
 * A row (one token, layer and head) belongs to `lanesPerRow` lanes, each
 * holding NV vectors; a block covers tokensPerBlock tokens × headRowsPerBlock
 * of their L*H heads, so small T still fills the GPU. Each lane loads its
 * next row before working on the current one, and the first row's loads are
 * in flight while the block computes its tokens' cos/sin rows.
 */
template <typename S, int NV>
__device__ __forceinline__ void fusedNormRopeTile(const FusedNormRopeParams& p) {
  constexpr int VEC = S::kPer16;
  extern __shared__ __align__(16) unsigned char shared[];
  const long long T = p.numTokens, L = p.numLayers, H = p.numKvHeads, D = p.headDim;
  const int R = static_cast<int>(p.rotaryDim);
  const int tokensPerBlock = static_cast<int>(p.tokensPerBlock);
  float* cosSin = reinterpret_cast<float*>(shared);
  long long* outRow = reinterpret_cast<long long*>(shared + ((static_cast<size_t>(tokensPerBlock) * R * sizeof(float) + 15) & ~static_cast<size_t>(15)));

  const long long headRows = L * H;
  const long long firstToken = static_cast<long long>(blockIdx.x) * tokensPerBlock;
  const int tokens = static_cast<int>(min(static_cast<long long>(tokensPerBlock), T - firstToken));
  const long long firstHeadRow = static_cast<long long>(blockIdx.y) * p.headRowsPerBlock;
  const int headRowsHere = static_cast<int>(min(p.headRowsPerBlock, headRows - firstHeadRow));
  const int rows = tokens * headRowsHere;
  const int lanes = static_cast<int>(p.lanesPerRow);
  const int lane = threadIdx.x & (lanes - 1);
  const int group = threadIdx.x / lanes;
  const int groups = blockDim.x / lanes;
  const int numVec = static_cast<int>(D / VEC);
  const bool weightIsF32 = p.weightIsF32 != 0;
  const size_t elementBytes = sizeof(typename S::Bits);
  const char* kvBytes = static_cast<const char*>(p.kv);

  // Token (within the block), layer and head of block row r.
  // 32-bit division: L*H < 2^31 (a tensor holds fewer than 2^31 elements).
  const unsigned heads = static_cast<unsigned>(H);
  auto locate = [&](int r, int& tt, long long& l, long long& h) {
    tt = r / headRowsHere;
    const unsigned lh = static_cast<unsigned>(firstHeadRow) + static_cast<unsigned>(r - tt * headRowsHere);
    l = lh / heads;
    h = lh - static_cast<unsigned>(l) * heads;
  };
  // Every address is inside kv whatever the token's position or slot.
  auto load = [&](RowVectors<NV>& into, int r) {
    int tt = 0;
    long long l = 0, h = 0;
    const bool live = r < rows;
    if (live) locate(r, tt, l, h);
    const long long kFirst = ((firstToken + tt) * L + l) * 2 * H * D + h * D;
#pragma unroll
    for (int s = 0; s < NV; s++) {
      const int vi = lane + s * lanes;
      const bool here = live && vi < numVec;
      into.k[s] = here ? load16(kvBytes + (kFirst + vi * VEC) * elementBytes) : make_uint4(0, 0, 0, 0);
      into.v[s] = here ? load16(kvBytes + (kFirst + H * D + vi * VEC) * elementBytes) : make_uint4(0, 0, 0, 0);
    }
  };

  RowVectors<NV> current, next;
  load(current, group);
  prepareFusedTokens(p, firstToken, tokens, cosSin, outRow);
  __syncthreads();

  for (int first = 0; first < rows; first += groups) {
    const bool more = first + groups < rows;
    if (more) load(next, first + groups + group);
    const int r = first + group;
    const bool live = r < rows;
    int tt = 0;
    long long l = 0, h = 0;
    if (live) locate(r, tt, l, h);
    const long long dst = live ? outRow[tt] : -1;

    float k[NV][VEC];
    float sumSquares = 0.0f;
#pragma unroll
    for (int s = 0; s < NV; s++) {
      unpack16<S>(current.k[s], k[s]);
#pragma unroll
      for (int u = 0; u < VEC; u++) sumSquares += k[s][u] * k[s][u];
    }
    sumSquares = sumOverLanes(sumSquares, lanes);
    const float inv = 1.0f / sqrtf(sumSquares / static_cast<float>(D) + (live ? p.eps[l] : 1.0f));
#pragma unroll
    for (int s = 0; s < NV; s++) {
      const int vi = lane + s * lanes;
      float w[VEC];
      if (live && vi < numVec) {
        loadWeights<S>(p.kNormWeight, l * D + vi * VEC, weightIsF32, w);
      } else {
#pragma unroll
        for (int u = 0; u < VEC; u++) w[u] = 0.0f;
      }
#pragma unroll
      for (int u = 0; u < VEC; u++) k[s][u] = k[s][u] * inv * w[u];
    }
    rotateRow<VEC, NV>(k, lane, lanes, numVec, R, p.gptj != 0, CosSinRow{cosSin + tt * R});

    if (dst >= 0) {
      const long long outFirst = ((l * p.outRows + dst) * H + h) * D;
#pragma unroll
      for (int s = 0; s < NV; s++) {
        const int vi = lane + s * lanes;
        if (vi < numVec) {
          const long long at = (outFirst + vi * VEC) * elementBytes;
          store16(static_cast<char*>(p.kOut) + at, pack16<S>(k[s]));
          store16(static_cast<char*>(p.vOut) + at, current.v[s]);
        }
      }
    }
    if (more) current = next;
  }
}

/**
 * Any shape: one warp per row, element by element, the RoPE partner re-read
 * from memory. For head dims that are not a whole number of 16-byte vectors,
 * or neox halves that do not fall on vector boundaries.
 */
template <typename S>
__device__ __forceinline__ void fusedNormRopeAnyShape(const FusedNormRopeParams& p) {
  const long long T = p.numTokens, L = p.numLayers, H = p.numKvHeads, D = p.headDim;
  const int R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  const bool weightIsF32 = p.weightIsF32 != 0;
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < T * L * H; row += warps) {
    const long long t = row / (L * H);
    const long long lh = row - t * L * H;
    const long long l = lh / H, h = lh - l * H;
    const long long position = loadIndex(p.positions, p.positionsAreI64, t);
    const bool positionOk = position >= p.positionMin && position < p.positionBelow;
    long long dst = t;
    bool slotOk = true;
    if (p.slots != nullptr) {
      dst = loadIndex(p.slots, p.slotsAreI64, t);
      slotOk = dst < p.slotBelow;
    }
    if (lh == 0 && lane == 0) {
      if (!positionOk) recordBadValue(p.badValue, p.positionCheck, t, position);
      if (!slotOk) recordBadValue(p.badValue, p.slotCheck, t, dst);
    }
    if (!positionOk || !slotOk || dst < 0) continue;
    if (p.slots != nullptr && p.slotOwners != nullptr && !ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, dst, t)) continue;

    const long long kFirst = (t * L + l) * 2 * H * D + h * D;
    float sumSquares = 0.0f;
    for (long long e = lane; e < D; e += 32) {
      const float x = loadElement<S>(p.kv, kFirst + e);
      sumSquares += x * x;
    }
    sumSquares = sumOverLanes(sumSquares, 32);
    const float inv = 1.0f / sqrtf(sumSquares / static_cast<float>(D) + p.eps[l]);
    auto normed = [&](long long e) {
      const float weight = weightIsF32 ? loadElement<F32>(p.kNormWeight, l * D + e) : loadElement<S>(p.kNormWeight, l * D + e);
      return loadElement<S>(p.kv, kFirst + e) * inv * weight;
    };
    const long long outFirst = ((l * p.outRows + dst) * H + h) * D;
    for (long long e = lane; e < D; e += 32) {
      float out = normed(e);
      if (e < R) {
        const bool first = p.gptj ? (e & 1) == 0 : e < halfR;
        const int j = p.gptj ? static_cast<int>(e >> 1) : static_cast<int>(first ? e : e - halfR);
        const long long other = p.gptj ? (first ? e + 1 : e - 1) : (first ? e + halfR : e - halfR);
        float c, s;
        cosSinAt(position, j, halfR, p.cosSinCache, p.cacheDType, p.ropeFrequencies, c, s);
        const float partner = normed(other);
        out = first ? out * c - partner * s : out * c + partner * s;
      }
      storeElement<S>(p.kOut, outFirst + e, out);
      copyElement<S>(p.vOut, outFirst + e, p.kv, kFirst + H * D + e);
    }
  }
}

}  // namespace kvkit

using kvkit::FusedNormRopeParams;

#define KVKIT_FUSED_ENTRIES(name, S)                                                                                                        \
  extern "C" __global__ void __launch_bounds__(256, 5) fused_norm_rope_##name##_nv1(const FusedNormRopeParams p) { kvkit::fusedNormRopeTile<S, 1>(p); } \
  extern "C" __global__ void __launch_bounds__(256) fused_norm_rope_##name##_nv2(const FusedNormRopeParams p) { kvkit::fusedNormRopeTile<S, 2>(p); } \
  extern "C" __global__ void __launch_bounds__(256) fused_norm_rope_##name##_any(const FusedNormRopeParams p) { kvkit::fusedNormRopeAnyShape<S>(p); }

KVKIT_FUSED_ENTRIES(f32, kvkit::F32)
KVKIT_FUSED_ENTRIES(f16, kvkit::F16)
KVKIT_FUSED_ENTRIES(bf16, kvkit::Bf16)
