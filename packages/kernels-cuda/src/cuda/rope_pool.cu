// ropePoolFused (SEMANTICS.md §3): RoPE on Q and K with angles from ropeBase,
// K and V scattered into the pools at their slots (negative: skipped), NHD or
// HND, in the model dtype or as fp8 codes (kv_pool.cuh), in the same row loop.
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "mrope.cuh"
#include "qk_norm.cuh"
#include "rope.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"
#include "unit_walk.cuh"

namespace kvkit {

// The position streams of a call: one ([N] positions), or mRoPE's three.
__device__ __forceinline__ PositionStreams positionStreams(const RopePoolParams& p) {
  return {p.positions, p.positionsAreI64, p.positionStreamStride, static_cast<int>(p.mropeTemporalPairs), static_cast<int>(p.mropeHeightPairsEnd), p.mropeInterleaved != 0};
}

// Token n's pool row: its slot, or -1 when it writes none (negative slot, or a slot a later token
// of the call also names). A slot past the pool rejects the whole call (check_values) and is
// skipped here too, so no write leaves a pool whatever reaches the kernel.
__device__ __forceinline__ long long settledPoolRow(const RopePoolParams& p, long long n, long long slot) {
  if (slot >= p.slotBelow || slot < 0) return -1;
  if (p.slotOwners != nullptr) {
    waitForPreviousGrid();
    if (!ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, slot, n)) return -1;
  }
  return slot;
}

// The same, reading the slot itself.
__device__ __forceinline__ long long poolRow(const RopePoolParams& p, long long n) { return settledPoolRow(p, n, loadIndex(p.slots, p.slotsAreI64, n)); }

// Where a view's rows sit: element strides between tokens, heads and a row's elements.
struct RowStrides {
  long long token, head, element;
};

// The strides of input `kind` (0: q, 1: k, 2: v).
__device__ __forceinline__ RowStrides inputStrides(const RopePoolParams& p, int kind) {
  if (kind == 0) return RowStrides{p.qTokenStride, p.qHeadStride, p.qElementStride};
  if (kind == 1) return RowStrides{p.kTokenStride, p.kHeadStride, p.kElementStride};
  return RowStrides{p.vTokenStride, p.vHeadStride, p.vElementStride};
}

// Element 0 of input `kind`: a view's element offset is already in its pointer.
__device__ __forceinline__ const void* inputBase(const RopePoolParams& p, int kind) { return kind == 0 ? p.q : kind == 1 ? p.k : p.v; }

/**
 * Rows of two 16-byte vectors per lane (the nv2 launch; rows of one vector
 * per lane take the token tiles of rope_pool_tiles.cuh). The rows of one token are its Hq
 * query heads, then H key heads, then H value heads (copied, not rotated).
 * Lane groups walk units of rows (unit_walk.cuh; the first units of the walk
 * are query rows, which need no slot) ROWS rows a step, loading the next
 * step's rows before working on this one's (AHEAD; wide rows, which need more
 * registers, load their own step); at a unit's first step a lane
 * computes the sincos of its elements for all the unit's rows. Inputs are
 * read through their token and head strides (the host takes this path only
 * where rows are contiguous and every row start is 16-byte aligned); the
 * outputs are contiguous, and a pool row takes each lane's vector in one store.
 */
template <typename S, int NV, int ROWS, bool AHEAD>
__device__ __forceinline__ void ropePoolUnits(const RopePoolParams& p) {
  constexpr int VEC = S::kPer16;
  constexpr size_t kElementBytes = sizeof(typename S::Bits);
  const int lanes = static_cast<int>(p.lanesPerRow);
  const int lane = threadIdx.x & (lanes - 1);
  const unsigned Hq = static_cast<unsigned>(p.numQoHeads), H = static_cast<unsigned>(p.numKvHeads), D = static_cast<unsigned>(p.headDim);
  const UnitWalk walk(p.numTokens, Hq + 2 * H, p.rowsPerUnit, p.unitsPerToken, lanes);
  const int R = static_cast<int>(p.rotaryDim);
  const int numVec = static_cast<int>(D) / VEC;
  const bool gptj = p.gptj != 0;
  extern __shared__ float4 angleSlots[];
  const LaneAngles<VEC, NV> angles(angleSlots);
  const AngleSource angleSource{nullptr, 0, false, static_cast<const unsigned*>(p.ropeAngles)};

  // Row y of token n: its tensor (0: q, 1: k, 2: v), head, and first element in the (contiguous) output.
  auto locate = [&](unsigned n, unsigned y, int& kind, unsigned& head) -> size_t {
    kind = y < Hq ? 0 : y < Hq + H ? 1 : 2;
    head = kind == 0 ? y : kind == 1 ? y - Hq : y - Hq - H;
    return (static_cast<size_t>(n) * (kind == 0 ? Hq : H) + head) * D;
  };
  auto load = [&](uint4 (&into)[ROWS][NV], const UnitStep& step) {
#pragma unroll
    for (int i = 0; i < ROWS; i++) {
      int kind;
      unsigned head;
      locate(step.t, step.row + i, kind, head);
      const RowStrides in = inputStrides(p, kind);
      const long long first = static_cast<long long>(step.t) * in.token + static_cast<long long>(head) * in.head;
      const char* src = static_cast<const char*>(inputBase(p, kind)) + first * static_cast<long long>(kElementBytes);
#pragma unroll
      for (int s = 0; s < NV; s++) {
        const int vi = lane + s * lanes;
        into[i][s] = i < step.left && vi < numVec ? loadOnce16(src + vi * 16) : make_uint4(0, 0, 0, 0);
      }
    }
  };

  uint4 current[ROWS][NV], next[ROWS][NV];
  UnitStep step = walk.first();
  if (AHEAD) load(current, step);
  const long long poolHeadElements = poolHeadStrideOf(p);
  long long slotFirst = -1;  // the unit's slot's head-0 row in the pools (poolSlotOf), -1: none
  while (!walk.done(step)) {
    const UnitStep following = walk.next<ROWS>(step);
    if (!AHEAD) load(current, step);
    // A unit's first step, while its rows load: angles for q and k rows, the slot's pool rows for k and v rows.
    if (step.r == 0) {
      const unsigned rowsHere = step.left;
      const bool rotates = rowsHere > 0 && step.row < Hq + H;
      if (p.positionStreamStride != 0) {
        fillStreamLaneAngles<VEC, NV>(angles, rotates, positionStreams(p), step.t, lane, lanes, R, gptj, angleSource.angleTable);
      } else {
        const long long position = rotates ? loadIndex(p.positions, p.positionsAreI64, step.t) : 0;
        fillLaneAngles<VEC, NV>(angles, rotates, position, lane, lanes, R, gptj, angleSource);
      }
      const long long slot = rowsHere > 0 && step.row + rowsHere > Hq ? poolRow(p, step.t) : -1;
      slotFirst = slot >= 0 ? poolSlotOf(p, slot) : -1;
    }
    if (AHEAD) load(next, following);
#pragma unroll
    for (int i = 0; i < ROWS; i++) {
      const bool live = i < step.left;
      int kind;
      unsigned head;
      const size_t first = locate(step.t, step.row + i, kind, head);
      if (__any_sync(kFullWarp, live && kind != 2)) {
        float f[NV][VEC];
#pragma unroll
        for (int s = 0; s < NV; s++) unpack16<S>(current[i][s], f[s]);
        // Q/K-norm on the row as loaded; the lane groups of a warp may hold rows of both kinds.
        const void* normWeight = kind == 0 ? p.qNormWeight : kind == 1 ? p.kNormWeight : nullptr;
        const bool weightIsF32 = (kind == 0 ? p.qNormWeightIsF32 : p.kNormWeightIsF32) != 0;
        if (__any_sync(kFullWarp, live && normWeight != nullptr)) normRowInLanes<S, NV>(f, live && normWeight != nullptr, normWeight, weightIsF32, static_cast<float>(p.normEps), lane, lanes, static_cast<int>(D));
        rotateRow<VEC, NV>(f, angles, lane, lanes, R, gptj);
        if (live && kind != 2) {
          char* rotated = static_cast<char*>(kind == 0 ? p.qRot : p.kRot) + first * kElementBytes;
#pragma unroll
          for (int s = 0; s < NV; s++) {
            const int vi = lane + s * lanes;
            current[i][s] = pack16<S>(f[s]);
            if (vi < numVec) storeOnce16(rotated + vi * 16, current[i][s]);
          }
        }
      }
      // K rows (as rotated and rounded) and V rows (as loaded) go to the pools.
      if (live && kind != 0 && slotFirst >= 0) {
        const PoolTarget pool = poolTarget(p, kind == 1 ? p.kPool : p.vPool, kind == 2, head);
        const long long row = slotFirst + static_cast<long long>(head) * poolHeadElements;
#pragma unroll
        for (int s = 0; s < NV; s++) {
          const int vi = lane + s * lanes;
          if (vi < numVec) storePoolVector<S>(pool, row + vi * VEC, current[i][s]);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < ROWS; i++)
#pragma unroll
      for (int s = 0; s < NV; s++)
        if (AHEAD) current[i][s] = next[i][s];
    step = following;
  }
}

}  // namespace kvkit

#include "rope_pool_tiles.cuh"

namespace kvkit {

// Any shape and any input strides: one warp per (token, row), element by element.
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
    const long long slot = poolRow(p, n);
    const RowStrides in = inputStrides(p, kind);
    const long long srcFirst = n * in.token + head * in.head;
    const long long rowFirst = (n * (kind == 0 ? Hq : H) + head) * D;
    const long long poolFirst = slot >= 0 ? poolRowOf(p, slot, head) : 0;
    using Bits = typename S::Bits;
    if (kind == 2) {
      if (slot >= 0) {
        const PoolTarget vTarget = poolTarget(p, p.vPool, true, head);
        for (long long e = lane; e < D; e += 32) storePoolElement<S>(vTarget, poolFirst + e, static_cast<const Bits*>(p.v)[srcFirst + e * in.element]);
      }
      continue;
    }
    const PoolTarget kTarget = kind == 1 && slot >= 0 ? poolTarget(p, p.kPool, false, head) : PoolTarget{nullptr, kPoolModelDType, 1.0f};
    const void* src = inputBase(p, kind);
    void* dst = kind == 0 ? p.qRot : p.kRot;
    const PositionStreams streams = positionStreams(p);
    const void* normWeight = kind == 0 ? p.qNormWeight : p.kNormWeight;
    const bool normed = normWeight != nullptr;
    const float inv = normed ? rowInverseRms<S>(src, srcFirst, in.element, D, static_cast<float>(p.normEps), lane) : 1.0f;
    const bool weightIsF32 = (kind == 0 ? p.qNormWeightIsF32 : p.kNormWeightIsF32) != 0;
    for (long long e = lane; e < D; e += 32) {
      float out = loadElement<S>(src, srcFirst + e * in.element);
      // As the vector path rounds it: (x · inv) · w.
      if (normed) out = out * inv * normWeightAt<S>(normWeight, weightIsF32, e);
      if (e < R) {
        const bool first = p.gptj ? (e & 1) == 0 : e < halfR;
        const int j = p.gptj ? static_cast<int>(e >> 1) : static_cast<int>(first ? e : e - halfR);
        const long long other = p.gptj ? (first ? e + 1 : e - 1) : (first ? e + halfR : e - halfR);
        float c, s;
        ropeCosSin(streams.at(n, j), j, static_cast<const unsigned*>(p.ropeAngles), c, s);
        float partner = loadElement<S>(src, srcFirst + other * in.element);
        if (normed) partner = partner * inv * normWeightAt<S>(normWeight, weightIsF32, other);
        out = rotatedElement(out, partner, c, first ? -s : s);
      }
      const Bits rounded = S::fromFloat(out);
      static_cast<Bits*>(dst)[rowFirst + e] = rounded;
      if (kind == 1 && slot >= 0) storePoolElement<S>(kTarget, poolFirst + e, rounded);
    }
  }
}

}  // namespace kvkit

using kvkit::RopePoolAnyLaunch;
using kvkit::RopePoolNv1Launch;
using kvkit::RopePoolNv2Launch;
using kvkit::RopePoolParams;

// Launch bounds and template arguments from the kernel's declaration (generated/params.cuh), which
// src/ops/rowTiles.ts plans with. A row here is one tensor's, half a fused row's bytes. Launched beside
// the call's value check or claim_slots (src/ops/ropePoolFused.ts), which write nothing it reads: each
// waits for them before its first write and reads the check's verdict then; a call it rejected writes
// nothing. The token tiles load their first rows and make their angles first.
#define KVKIT_ROPE_POOL_ENTRY(name, S, path, L)                                                                                    \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) rope_pool_##name##_##path(const RopePoolParams p) { \
    kvkit::waitForPreviousGrid();                                                                                                  \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                           \
    kvkit::ropePoolUnits<S, L::kVectorsPerLane, L::kRowsPerStep, L::kRowAhead>(p);                                                 \
  }
// The token tiles' builds: lanes of one vector or of pairs (paired: half the rows in flight a group, as many bytes), pools of the
// model dtype or fp8 too.
#define KVKIT_ROPE_POOL_TILES(entry, S, FP8, PAIRED)                                                                              \
  extern "C" __global__ void __launch_bounds__(RopePoolNv1Launch::kThreads, RopePoolNv1Launch::kMinBlocksPerSM) entry(const RopePoolParams p) { \
    kvkit::ropePoolTiles<S, RopePoolNv1Launch::kRowsPerStep / ((PAIRED) ? 2 : 1), RopePoolNv1Launch::kStagedBatches, FP8, PAIRED>(p); \
  }
#define KVKIT_ROPE_POOL_ENTRIES(name, S)                                 \
  KVKIT_ROPE_POOL_TILES(rope_pool_##name##_nv1, S, false, false)         \
  KVKIT_ROPE_POOL_TILES(rope_pool_##name##_nv1_fp8, S, true, false)      \
  KVKIT_ROPE_POOL_TILES(rope_pool_##name##_nv1_paired, S, false, true)   \
  KVKIT_ROPE_POOL_TILES(rope_pool_##name##_nv1_paired_fp8, S, true, true) \
  KVKIT_ROPE_POOL_ENTRY(name, S, nv2, RopePoolNv2Launch)                                                                                                            \
  extern "C" __global__ void __launch_bounds__(RopePoolAnyLaunch::kThreads) rope_pool_##name##_any(const RopePoolParams p) {                                         \
    kvkit::waitForPreviousGrid();                                                                                                                                   \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                                                           \
    kvkit::ropePoolAnyShape<S>(p);                                                                                                                                  \
  }

KVKIT_ROPE_POOL_ENTRIES(f32, kvkit::F32)
KVKIT_ROPE_POOL_ENTRIES(f16, kvkit::F16)
KVKIT_ROPE_POOL_ENTRIES(bf16, kvkit::Bf16)
