// fusedNormRopeStacked (SEMANTICS.md §1), also the second half of the materializer:
// RMSNorm + RoPE of every K head, V copied bit for bit, [T, L, 2*H*D] -> [L, rows, H, D],
// or (materializeInto) into pools of any layout and dtype at the slots (kv_pool.cuh).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "mrope.cuh"
#include "rope.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"
#include "unit_walk.cuh"

namespace kvkit {

// The position streams of a call: one ([T] positions), or mRoPE's three.
__device__ __forceinline__ PositionStreams positionStreams(const FusedNormRopeParams& p) {
  return {p.positions, p.positionsAreI64, p.positionStreamStride, static_cast<int>(p.mropeTemporalPairs), static_cast<int>(p.mropeHeightPairsEnd), p.mropeInterleaved != 0};
}

/**
 * Token t's destination row (-1: not written): t itself, or its slot; of
 * tokens sharing a slot, only the slot's owner writes. `position` is the
 * first stream's. A call with a bad position (of any mRoPE stream) or slot
 * never gets here (check_values rejects it); a bad one is still skipped, so
 * no access leaves a tensor whatever reaches the kernel.
 */
__device__ __forceinline__ long long fusedTokenRow(const FusedNormRopeParams& p, long long t, long long& position, bool& positionOk) {
  position = loadIndex(p.positions, p.positionsAreI64, t);
  positionOk = position >= p.positionMin && position < p.positionBelow;
  // mRoPE: the height and width streams.
  for (long long s = 1; p.positionStreamStride != 0 && s < 3; s++) {
    const long long other = loadIndex(p.positions, p.positionsAreI64, s * p.positionStreamStride + t);
    positionOk = positionOk && other >= p.positionMin && other < p.positionBelow;
  }
  long long row = t;
  if (p.slots != nullptr) {
    row = loadIndex(p.slots, p.slotsAreI64, t);
    if (row >= p.slotBelow) return -1;
    if (positionOk && row >= 0 && p.slotOwners != nullptr && !ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, row, t)) return -1;
  }
  return positionOk && row >= 0 ? row : -1;
}

/**
 * The fast path: rows whose length is a whole number of 16-byte vectors. A row
 * (one token, layer and head) belongs to `lanesPerRow` lanes, each holding NV
 * vectors; lane groups walk units of rows (unit_walk.cuh) ROWS rows a step,
 * loading the next step's rows before working on this one's (AHEAD; wide
 * rows, which need more registers, load their own step). At a unit's
 * first step a lane fetches the cos/sin of its elements (a cached token row,
 * or sincos) for all the unit's rows. In place (kOut == kv, vOut null) is
 * safe: a row is read and written by the same lanes. PAIRED (NV = 2, neox
 * over the whole row, half the row's vectors in lanes): a lane's two vectors
 * are each other's rotation partners, so no shuffle fetches them, and a lane
 * has twice the bytes in flight.
 */
template <typename S, int NV, int ROWS, bool AHEAD, bool PAIRED = false>
__device__ __forceinline__ void fusedNormRopeUnits(const FusedNormRopeParams& p) {
  static_assert(!PAIRED || NV == 2, "a pair is two vectors a lane");
  constexpr int VEC = S::kPer16;
  constexpr size_t kElementBytes = sizeof(typename S::Bits);
  const int lanes = static_cast<int>(p.lanesPerRow);
  const int lane = threadIdx.x & (lanes - 1);
  const unsigned H = static_cast<unsigned>(p.numKvHeads), D = static_cast<unsigned>(p.headDim);
  const UnitWalk walk(p.numTokens, static_cast<unsigned>(p.numLayers) * H, p.rowsPerUnit, p.unitsPerToken, lanes);
  const int R = static_cast<int>(p.rotaryDim);
  const int numVec = static_cast<int>(D) / VEC;
  const bool gptj = p.gptj != 0;
  const bool weightIsF32 = p.weightIsF32 != 0;
  extern __shared__ float4 angleSlots[];
  // Paired: the lower vector's angles serve its partner too (the same cos, sin negated).
  constexpr int ANGLE_VECTORS = PAIRED ? 1 : NV;
  const LaneAngles<VEC, ANGLE_VECTORS> angles(angleSlots);
  const AngleSource angleSource{p.cosSinCache, p.cacheDType, p.cacheVectors != 0, static_cast<const unsigned*>(p.ropeAngles)};
  const char* kv = static_cast<const char*>(p.kv);
  const size_t vOffsetBytes = static_cast<size_t>(p.vOffset) * kElementBytes;
  const bool copyV = p.vOut != nullptr;

  // A step's raw K and V vectors. Every address is inside kv whatever the token's position or slot.
  struct Rows {
    uint4 k[ROWS][NV];
    uint4 v[ROWS][NV];
  };
  auto load = [&](Rows& into, const UnitStep& step) {
    unsigned layer = step.row / H;
    unsigned head = step.row - layer * H;
    const char* token = kv + static_cast<size_t>(step.t) * static_cast<size_t>(p.kvTokenStride) * kElementBytes;
#pragma unroll
    for (int i = 0; i < ROWS; i++) {
      const char* row = token + (static_cast<size_t>(layer) * static_cast<size_t>(p.kvLayerStride) + static_cast<size_t>(head) * static_cast<size_t>(p.kvHeadStride)) * kElementBytes;
#pragma unroll
      for (int s = 0; s < NV; s++) {
        const int vi = lane + s * lanes;
        const bool here = i < step.left && vi < numVec;
        into.k[i][s] = here ? loadOnce16(row + vi * 16) : make_uint4(0, 0, 0, 0);
        into.v[i][s] = here && copyV ? loadOnce16(row + vOffsetBytes + vi * 16) : make_uint4(0, 0, 0, 0);
      }
      if (++head == H) {
        head = 0;
        ++layer;
      }
    }
  };

  Rows current, next;
  UnitStep step = walk.first();
  if (AHEAD) load(current, step);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // Launched beside the call's value check (call != 0), which writes nothing this grid reads: the first unit's
  // rows, position and angles load while it ends; before its first write the thread waits for it and reads the
  // verdict (a call it rejected writes nothing).
  bool settled = p.call == 0;
  bool rejected = false;
#else
  // No overlapped launch before Hopper: the check has ended, and a call it rejected stops here.
  if (callRejected(p.badValue, p.call)) return;
  constexpr bool rejected = false;
#endif
  const long long headElements = poolHeadStrideOf(p);
  long long dstFirst = -1;  // head 0's row of the unit's destination row in a layer (poolSlotOf), -1: not written
  while (!walk.done(step)) {
    const UnitStep following = walk.next<ROWS>(step);
    if (!AHEAD) load(current, step);
    // A unit's first step: its token's destination and the lane's angles, while this step's rows load.
    if (step.r == 0) {
      long long position = 0;
      bool positionOk = false;
      const long long dst = step.left > 0 ? fusedTokenRow(p, step.t, position, positionOk) : -1;
      dstFirst = dst >= 0 ? poolSlotOf(p, dst) : -1;
      // mRoPE: each pair at its stream's position, element by element (one inlined fill, so no spills at 64 registers).
      const PositionStreams streams = positionStreams(p);
      const long long token = step.t;
      fillLaneAnglesAt<VEC, ANGLE_VECTORS>(angles, dst >= 0, position, lane, lanes, R, gptj, angleSource, streams.many(), [&](int j) { return streams.at(token, j); });
    }
    if (AHEAD) load(next, following);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (!settled) {
      waitForPreviousGrid();
      rejected = callRejected(p.badValue, p.call);
      settled = true;
    }
#endif
    unsigned layer = step.row / H;
    unsigned head = step.row - layer * H;
#pragma unroll
    for (int i = 0; i < ROWS; i++) {
      const bool live = i < step.left;
      const float eps = live ? p.eps[layer] : 1.0f;
      // A bad eps rejected the call (check_values): every eps that reaches here is finite and >= 0.
      const bool writes = live && dstFirst >= 0 && !rejected;
      // Element 0 of the destination row: layers outLayerStride apart, the row in its layer as the pool lays it out.
      const long long out = static_cast<long long>(layer) * p.outLayerStride + dstFirst + static_cast<long long>(head) * headElements;
      if (copyV && writes) {
        const PoolTarget vTarget = poolTarget(p, p.vOut, true, head);
#pragma unroll
        for (int s = 0; s < NV; s++) {
          const int vi = lane + s * lanes;
          if (vi < numVec) storePoolVector<S>(vTarget, out + vi * VEC, current.v[i][s]);
        }
      }
      float x[NV][VEC];
      float sumSquares = 0.0f;
      // Paired: each vector's sum, then the pair's (as the lane per vector's first shuffle adds them); else one running sum.
      float vectorSums[NV];
#pragma unroll
      for (int s = 0; s < NV; s++) {
        unpack16<S>(current.k[i][s], x[s]);
        vectorSums[s] = 0.0f;
#pragma unroll
        for (int u = 0; u < VEC; u++) {
          if (PAIRED) vectorSums[s] += x[s][u] * x[s][u];
          else sumSquares += x[s][u] * x[s][u];
        }
      }
      if (PAIRED) sumSquares = vectorSums[0] + vectorSums[NV - 1];
      sumSquares = sumOverLanes(sumSquares, lanes);
      const float inv = 1.0f / sqrtf(sumSquares / static_cast<float>(D) + eps);
#pragma unroll
      for (int s = 0; s < NV; s++) {
        const int vi = lane + s * lanes;
        float w[VEC];
        if (live && vi < numVec) {
          loadWeights<S>(p.kNormWeight, static_cast<long long>(layer * D + vi * VEC), weightIsF32, w);
        } else {
#pragma unroll
          for (int u = 0; u < VEC; u++) w[u] = 0.0f;
        }
#pragma unroll
        for (int u = 0; u < VEC; u++) x[s][u] = x[s][u] * inv * w[u];
      }
      if constexpr (PAIRED) {
        float c[VEC], s[VEC];
        angles.load(0, c, s);
#pragma unroll
        for (int u = 0; u < VEC; u++) {
          const float lower = x[0][u], upper = x[NV - 1][u];
          x[0][u] = rotatedElement(lower, upper, c[u], s[u]);
          x[NV - 1][u] = rotatedElement(upper, lower, c[u], -s[u]);
        }
      } else {
        rotateRow<VEC, NV>(x, angles, lane, lanes, R, gptj);
      }
      if (writes) {
        const PoolTarget kTarget = poolTarget(p, p.kOut, false, head);
#pragma unroll
        for (int s = 0; s < NV; s++) {
          const int vi = lane + s * lanes;
          if (vi < numVec) storePoolVector<S>(kTarget, out + vi * VEC, pack16<S>(x[s]));
        }
      }
      if (++head == H) {
        head = 0;
        ++layer;
      }
    }
    if (AHEAD) current = next;
    step = following;
  }
}

/**
 * Any shape: one warp per row, element by element, the RoPE partner re-read
 * from memory. For head dims that are not a whole number of 16-byte vectors,
 * neox halves that do not fall on vector boundaries, or kv rows that are not
 * contiguous (any element stride) or not 16-byte aligned. Never in place.
 */
template <typename S>
__device__ __forceinline__ void fusedNormRopeAnyShape(const FusedNormRopeParams& p) {
  const long long T = p.numTokens, L = p.numLayers, H = p.numKvHeads, D = p.headDim;
  const int R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  const bool weightIsF32 = p.weightIsF32 != 0;
  const PositionStreams streams = positionStreams(p);
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < T * L * H; row += warps) {
    const long long t = row / (L * H);
    const long long lh = row - t * L * H;
    const long long l = lh / H, h = lh - l * H;
    long long position = 0;
    bool positionOk = false;
    const long long dst = fusedTokenRow(p, t, position, positionOk);
    const float eps = p.eps[l];
    // The whole warp holds this row, so skipping it keeps the warp together.
    if (dst < 0) continue;

    const long long kFirst = t * p.kvTokenStride + l * p.kvLayerStride + h * p.kvHeadStride;
    const long long step = p.kvElementStride;
    float sumSquares = 0.0f;
    for (long long e = lane; e < D; e += 32) {
      const float x = loadElement<S>(p.kv, kFirst + e * step);
      sumSquares += x * x;
    }
    sumSquares = sumOverLanes(sumSquares, 32);
    const float inv = 1.0f / sqrtf(sumSquares / static_cast<float>(D) + eps);
    auto normed = [&](long long e) {
      const float weight = weightIsF32 ? loadElement<F32>(p.kNormWeight, l * D + e) : loadElement<S>(p.kNormWeight, l * D + e);
      return loadElement<S>(p.kv, kFirst + e * step) * inv * weight;
    };
    const long long outFirst = l * p.outLayerStride + poolRowOf(p, dst, h);
    const PoolTarget kTarget = poolTarget(p, p.kOut, false, h);
    const PoolTarget vTarget = p.vOut != nullptr ? poolTarget(p, p.vOut, true, h) : PoolTarget{nullptr, kPoolModelDType, 1.0f};
    using Bits = typename S::Bits;
    for (long long e = lane; e < D; e += 32) {
      float out = normed(e);
      if (e < R) {
        const bool first = p.gptj ? (e & 1) == 0 : e < halfR;
        const int j = p.gptj ? static_cast<int>(e >> 1) : static_cast<int>(first ? e : e - halfR);
        const long long other = p.gptj ? (first ? e + 1 : e - 1) : (first ? e + halfR : e - halfR);
        float c, s;
        cosSinAt(streams.many() ? streams.at(t, j) : position, j, halfR, p.cosSinCache, p.cacheDType, static_cast<const unsigned*>(p.ropeAngles), c, s);
        const float partner = normed(other);
        out = rotatedElement(out, partner, c, first ? -s : s);
      }
      storePoolElement<S>(kTarget, outFirst + e, S::fromFloat(out));
      if (p.vOut != nullptr) storePoolElement<S>(vTarget, outFirst + e, static_cast<const Bits*>(p.kv)[kFirst + p.vOffset + e * step]);
    }
  }
}

}  // namespace kvkit

using kvkit::FusedNormRopeAnyLaunch;
using kvkit::FusedNormRopeNv1Launch;
using kvkit::FusedNormRopeNv2Launch;
using kvkit::FusedNormRopePairedLaunch;
using kvkit::FusedNormRopeParams;

// Launch bounds and template arguments from the kernel's declaration (generated/params.cuh), which
// src/ops/rowTiles.ts plans with: blocks per multiprocessor, vectors per lane, rows per step, a row ahead.
// Launched to overlap the grid ahead (its launch latency hidden behind that grid's tail), each lets the next
// grid launch at once. Behind anything but the call's own value check it waits for that grid before any global
// access; behind the check (call != 0) the vector paths load their first unit and wait before they write. A
// call its value check rejected writes nothing.
#define KVKIT_FUSED_ENTRY(name, S, path, L)                                                                                               \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) fused_norm_rope_##name##_##path(const FusedNormRopeParams p) { \
    if (p.call == 0) kvkit::waitForPreviousGrid();                                                                                        \
    kvkit::letNextGridLaunch();                                                                                                           \
    kvkit::fusedNormRopeUnits<S, L::kVectorsPerLane, L::kRowsPerStep, L::kRowAhead>(p);                                                   \
  }
// Rows of one vector per lane again as pairs of vectors in half the lanes (rowTiles.ts pairs neox rows over their whole length).
#define KVKIT_FUSED_PAIRED_ENTRY(name, S, L)                                                                                                 \
  extern "C" __global__ void __launch_bounds__(L::kThreads, L::kMinBlocksPerSM) fused_norm_rope_##name##_nv1_paired(const FusedNormRopeParams p) { \
    if (p.call == 0) kvkit::waitForPreviousGrid();                                                                                           \
    kvkit::letNextGridLaunch();                                                                                                              \
    kvkit::fusedNormRopeUnits<S, L::kVectorsPerLane, L::kRowsPerStep, L::kRowAhead, true>(p);                                                 \
  }
#define KVKIT_FUSED_ENTRIES(name, S)                                                                                                 \
  KVKIT_FUSED_ENTRY(name, S, nv1, FusedNormRopeNv1Launch)                                                                            \
  KVKIT_FUSED_PAIRED_ENTRY(name, S, FusedNormRopePairedLaunch)                                                                       \
  KVKIT_FUSED_ENTRY(name, S, nv2, FusedNormRopeNv2Launch)                                                                            \
  extern "C" __global__ void __launch_bounds__(FusedNormRopeAnyLaunch::kThreads) fused_norm_rope_##name##_any(const FusedNormRopeParams p) { \
    kvkit::waitForPreviousGrid();                                                                                                    \
    kvkit::letNextGridLaunch();                                                                                                      \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                             \
    kvkit::fusedNormRopeAnyShape<S>(p);                                                                                              \
  }

KVKIT_FUSED_ENTRIES(f32, kvkit::F32)
KVKIT_FUSED_ENTRIES(f16, kvkit::F16)
KVKIT_FUSED_ENTRIES(bf16, kvkit::Bf16)
