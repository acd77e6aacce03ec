// ropePoolFused (SEMANTICS.md §3): RoPE on Q and K with angles from ropeBase,
// K and V scattered into [S, H, D] pools at their slots (negative: skipped).
#include "bad_values.cuh"
#include "params.cuh"
#include "rope.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

namespace kvkit {

// Token n's pool row: its slot, or -1 when it writes none (negative slot, slot past the pool
// (recorded once, by the first block column), or a slot a later token of the call also names).
__device__ __forceinline__ long long poolRow(const RopePoolParams& p, long long n, bool record) {
  const long long slot = loadIndex(p.slots, p.slotsAreI64, n);
  if (slot >= p.slotBelow) {
    if (record) recordBadValue(p.badValue, p.slotCheck, n, slot);
    return -1;
  }
  if (slot < 0 || (p.slotOwners != nullptr && !ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, slot, n))) return -1;
  return slot;
}

// Per token of the block: its pool slot (-1: not written) and its cos ‖ sin row, each sincos computed once.
__device__ __forceinline__ void prepareRopePoolTokens(const RopePoolParams& p, long long firstToken, int tokens, float* cosSin, long long* slotOf) {
  const int R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  for (int i = threadIdx.x; i < tokens * halfR; i += blockDim.x) {
    const int tt = i / halfR;
    const int j = i - tt * halfR;
    const long long n = firstToken + tt;
    if (j == 0) slotOf[tt] = poolRow(p, n, blockIdx.y == 0);
    const long long position = loadIndex(p.positions, p.positionsAreI64, n);
    float c, s;
    sincosf(static_cast<float>(position) * p.ropeFrequencies[j], &s, &c);
    cosSin[tt * R + j] = c;
    cosSin[tt * R + halfR + j] = s;
  }
}

/**
 * Fast path, rows of whole 16-byte vectors. The rows of one token are its Hq
 * query heads, then H key heads, then H value heads (copied, not rotated).
 * Each lane loads its next row before working on the current one.
 */
template <typename S, int NV>
__device__ __forceinline__ void ropePoolTile(const RopePoolParams& p) {
  constexpr int VEC = S::kPer16;
  extern __shared__ __align__(16) unsigned char shared[];
  const long long N = p.numTokens, Hq = p.numQoHeads, H = p.numKvHeads, D = p.headDim;
  const int R = static_cast<int>(p.rotaryDim);
  const int tokensPerBlock = static_cast<int>(p.tokensPerBlock);
  float* cosSin = reinterpret_cast<float*>(shared);
  long long* slotOf = reinterpret_cast<long long*>(shared + ((static_cast<size_t>(tokensPerBlock) * R * sizeof(float) + 15) & ~static_cast<size_t>(15)));

  const long long headRows = Hq + 2 * H;
  const long long firstToken = static_cast<long long>(blockIdx.x) * tokensPerBlock;
  const int tokens = static_cast<int>(min(static_cast<long long>(tokensPerBlock), N - firstToken));
  const long long firstHeadRow = static_cast<long long>(blockIdx.y) * p.headRowsPerBlock;
  const int headRowsHere = static_cast<int>(min(p.headRowsPerBlock, headRows - firstHeadRow));
  const int rows = tokens * headRowsHere;
  const int lanes = static_cast<int>(p.lanesPerRow);
  const int lane = threadIdx.x & (lanes - 1);
  const int group = threadIdx.x / lanes;
  const int groups = blockDim.x / lanes;
  const int numVec = static_cast<int>(D / VEC);
  const size_t elementBytes = sizeof(typename S::Bits);

  // Token (within the block), tensor (0 = q, 1 = k, 2 = v) and head of block row r.
  auto locate = [&](int r, int& tt, int& kind, long long& head) {
    tt = r / headRowsHere;
    const long long y = firstHeadRow + (r - tt * headRowsHere);
    kind = y < Hq ? 0 : y < Hq + H ? 1 : 2;
    head = kind == 0 ? y : kind == 1 ? y - Hq : y - Hq - H;
  };
  auto load = [&](uint4 (&into)[NV], int r) {
    int tt = 0, kind = 0;
    long long head = 0;
    const bool live = r < rows;
    if (live) locate(r, tt, kind, head);
    const void* src = kind == 0 ? p.q : kind == 1 ? p.k : p.v;
    const long long first = ((firstToken + tt) * (kind == 0 ? Hq : H) + head) * D;
#pragma unroll
    for (int s = 0; s < NV; s++) {
      const int vi = lane + s * lanes;
      into[s] = live && vi < numVec ? load16(static_cast<const char*>(src) + (first + vi * VEC) * elementBytes) : make_uint4(0, 0, 0, 0);
    }
  };

  uint4 current[NV], next[NV];
  load(current, group);
  prepareRopePoolTokens(p, firstToken, tokens, cosSin, slotOf);
  __syncthreads();

  for (int first = 0; first < rows; first += groups) {
    const bool more = first + groups < rows;
    if (more) load(next, first + groups + group);
    const int r = first + group;
    const bool live = r < rows;
    int tt = 0, kind = 0;
    long long head = 0;
    if (live) locate(r, tt, kind, head);
    const long long n = firstToken + tt;
    float x[NV][VEC];
#pragma unroll
    for (int s = 0; s < NV; s++) unpack16<S>(current[s], x[s]);
    rotateRow<VEC, NV>(x, lane, lanes, numVec, R, p.gptj != 0, CosSinRow{cosSin + tt * R});

    if (live) {
      const long long slot = slotOf[tt];
      const long long rowFirst = (n * (kind == 0 ? Hq : H) + head) * D;
      const long long poolFirst = (slot * H + head) * D;
#pragma unroll
      for (int s = 0; s < NV; s++) {
        const int vi = lane + s * lanes;
        if (vi >= numVec) continue;
        const long long at = vi * VEC;
        if (kind == 2) {
          if (slot >= 0) store16(static_cast<char*>(p.vPool) + (poolFirst + at) * elementBytes, current[s]);
          continue;
        }
        const uint4 rotated = pack16<S>(x[s]);
        store16(static_cast<char*>(kind == 0 ? p.qRot : p.kRot) + (rowFirst + at) * elementBytes, rotated);
        if (kind == 1 && slot >= 0) store16(static_cast<char*>(p.kPool) + (poolFirst + at) * elementBytes, rotated);
      }
    }
    if (more) {
#pragma unroll
      for (int s = 0; s < NV; s++) current[s] = next[s];
    }
  }
}

// Any shape: one warp per (token, row), element by element.
template <typename S>
__device__ __forceinline__ void ropePoolAnyShape(const RopePoolParams& p) {
  const long long N = p.numTokens, Hq = p.numQoHeads, H = p.numKvHeads, D = p.headDim;
  const int R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  const long long headRows = Hq + 2 * H;
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < N * headRows; row += warps) {
    const long long n = row / headRows;
    const long long y = row - n * headRows;
    const int kind = y < Hq ? 0 : y < Hq + H ? 1 : 2;
    const long long head = kind == 0 ? y : kind == 1 ? y - Hq : y - Hq - H;
    const long long slot = poolRow(p, n, y == 0 && lane == 0);
    const long long rowFirst = (n * (kind == 0 ? Hq : H) + head) * D;
    const long long poolFirst = (slot * H + head) * D;
    if (kind == 2) {
      if (slot >= 0)
        for (long long e = lane; e < D; e += 32) copyElement<S>(p.vPool, poolFirst + e, p.v, rowFirst + e);
      continue;
    }
    const void* src = kind == 0 ? p.q : p.k;
    void* dst = kind == 0 ? p.qRot : p.kRot;
    const float position = static_cast<float>(loadIndex(p.positions, p.positionsAreI64, n));
    for (long long e = lane; e < D; e += 32) {
      float out = loadElement<S>(src, rowFirst + e);
      if (e < R) {
        const bool first = p.gptj ? (e & 1) == 0 : e < halfR;
        const int j = p.gptj ? static_cast<int>(e >> 1) : static_cast<int>(first ? e : e - halfR);
        const long long other = p.gptj ? (first ? e + 1 : e - 1) : (first ? e + halfR : e - halfR);
        float c, s;
        sincosf(position * p.ropeFrequencies[j], &s, &c);
        const float partner = loadElement<S>(src, rowFirst + other);
        out = first ? out * c - partner * s : out * c + partner * s;
      }
      storeElement<S>(dst, rowFirst + e, out);
      if (kind == 1 && slot >= 0) copyElement<S>(p.kPool, poolFirst + e, dst, rowFirst + e);
    }
  }
}

}  // namespace kvkit

using kvkit::RopePoolParams;

#define KVKIT_ROPE_POOL_ENTRIES(name, S)                                                                                             \
  extern "C" __global__ void __launch_bounds__(256, 6) rope_pool_##name##_nv1(const RopePoolParams p) { kvkit::ropePoolTile<S, 1>(p); } \
  extern "C" __global__ void __launch_bounds__(256) rope_pool_##name##_nv2(const RopePoolParams p) { kvkit::ropePoolTile<S, 2>(p); } \
  extern "C" __global__ void __launch_bounds__(256) rope_pool_##name##_any(const RopePoolParams p) { kvkit::ropePoolAnyShape<S>(p); }

KVKIT_ROPE_POOL_ENTRIES(f32, kvkit::F32)
KVKIT_ROPE_POOL_ENTRIES(f16, kvkit::F16)
KVKIT_ROPE_POOL_ENTRIES(bf16, kvkit::Bf16)
