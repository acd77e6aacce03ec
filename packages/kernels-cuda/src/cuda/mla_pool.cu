// mlaPoolFused (src/ops/mlaPoolFused.ts; docs: ops/mlaPoolFused): each token's latent row [c_kv, k_pe] becomes
// [c_kv · inv · w, rope(k_pe)] in a one-head pool at its slot (with one head, slot s is row s in both layouts), in
// the model dtype or as fp8 codes; each query head's last R values are rotated with the same angles, the rest copied.
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "kv_pool.cuh"
#include "rope.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

namespace kvkit {

// Token n's pool row, or -1 where it writes none: a negative slot, one past the pool (the call is rejected then
// anyway), or a slot a later token of the call also names.
__device__ __forceinline__ long long mlaSlot(const MlaPoolParams& p, long long n) {
  const long long slot = loadIndex(p.slots, p.slotsAreI64, n);
  if (slot >= p.slotBelow || slot < 0) return -1;
  if (p.slotOwners != nullptr && !ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, slot, n)) return -1;
  return slot;
}

// The pool as a row store: the model dtype's bits, or fp8 codes of x / scale.
__device__ __forceinline__ PoolTarget mlaTarget(const MlaPoolParams& p) {
  const int code = static_cast<int>(p.poolDType);
  return PoolTarget{p.pool, code, code == kPoolModelDType ? 1.0f : __ldg(p.scale)};
}

/**
 * Rotates the VEC values of one vector of a RoPE part in place; `e0` is the vector's first index within the
 * part, `cs` the token's R/2 (cos, sin) pairs. gptj pairs lie within the vector; neox pairs with `partner`,
 * the vector R/2 values away, loaded by the caller.
 */
template <int VEC>
__device__ __forceinline__ void mlaRotate(float (&x)[VEC], const float (&partner)[VEC], int e0, int half, bool gptj, const float2* cs) {
  if (gptj) {
#pragma unroll
    for (int k = 0; k < VEC; k += 2) {
      const float2 a = cs[(e0 + k) >> 1];
      const float x0 = x[k], x1 = x[k + 1];
      x[k] = rotatedElement(x0, x1, a.x, -a.y);
      x[k + 1] = rotatedElement(x1, x0, a.x, a.y);
    }
    return;
  }
  const bool lower = e0 < half;
#pragma unroll
  for (int k = 0; k < VEC; k++) {
    const float2 a = cs[lower ? e0 + k : e0 + k - half];
    x[k] = rotatedElement(x[k], partner[k], a.x, lower ? -a.y : a.y);
  }
}

// Query vectors a thread loads before it works on them: four 16-byte loads in flight each.
constexpr int kMlaQueryBatch = 4;
// Vectors of a latent row a lane holds between summing its squares and storing it: DeepSeek's 576 values are
// 72 vectors of 16-bit values (three a lane), 144 of f32 (the f32 rows are read twice).
constexpr int kMlaRowVecsPerLane = 3;

/**
 * The vector path: a block takes tokensPerBlock tokens. Their cos/sin go to shared memory first (one angle per
 * pair and token, not per head), while each warp's first latent row is loaded into registers and its slot looked
 * up; then a warp per token sums its row's squares over the warp, and norms, rotates and stores it; and every
 * thread takes query vectors, kMlaQueryBatch at a time, copying those before the RoPE part and rotating the others.
 */
template <typename S>
__device__ __forceinline__ void mlaPoolVectors(const MlaPoolParams& p) {
  constexpr int VEC = S::kPer16;
  constexpr long long EB = sizeof(typename S::Bits);
  extern __shared__ float2 mlaAngles[];
  const long long first = static_cast<long long>(blockIdx.x) * p.tokensPerBlock;
  const int tokens = static_cast<int>(min(p.tokensPerBlock, p.numTokens - first));
  const int R = static_cast<int>(p.ropeDim);
  const int half = R >> 1;
  const bool gptj = p.gptj != 0;
  const int C = static_cast<int>(p.kvLoraRank);
  const int rowVecs = (C + R) / VEC;
  const int normVecs = C / VEC;
  const int partnerVecs = half / VEC;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  const bool weightIsF32 = p.kvNormWeightIsF32 != 0;
  // A lane holds its vectors v = lane + 32k of the row (kMlaRowVecsPerLane at most, else they are read again),
  // so the row is read once: its squares summed, then normed or rotated and stored.
  constexpr int kHeld = kMlaRowVecsPerLane;
  const bool held = rowVecs <= 32 * kHeld;
  uint4 bits[kHeld];
  long long slot = -1;
  // Token t's row into bits and its slot (its owner looked up while the row is in flight).
  auto loadRow = [&](int t) {
    const char* src = static_cast<const char*>(p.kvLatent) + (first + t) * p.latentTokenStride * EB;
#pragma unroll
    for (int k = 0; k < kHeld; k++) {
      const int v = lane + 32 * k;
      if (held && v < rowVecs) bits[k] = load16(src + v * 16);
    }
    slot = mlaSlot(p, first + t);
  };
  // The warp's first row is loaded before the angles are made, so its latency hides under them.
  if (warp < tokens) loadRow(warp);
  for (int i = threadIdx.x; i < tokens * half; i += blockDim.x) {
    const int t = i / half;
    float c, s;
    ropeCosSin(loadIndex(p.positions, p.positionsAreI64, first + t), i - t * half, static_cast<const unsigned*>(p.ropeAngles), c, s);
    mlaAngles[i] = make_float2(c, s);
  }
  __syncthreads();

  for (int t = warp; t < tokens; t += warps) {
    const long long n = first + t;
    if (t != warp) loadRow(t);
    if (slot < 0) continue;
    const char* src = static_cast<const char*>(p.kvLatent) + n * p.latentTokenStride * EB;
    float sumSquares = 0.0f;
    if (held) {
#pragma unroll
      for (int k = 0; k < kHeld; k++) {
        const int v = lane + 32 * k;
        if (v >= normVecs) continue;
        float x[VEC];
        unpack16<S>(bits[k], x);
#pragma unroll
        for (int e = 0; e < VEC; e++) sumSquares = fmaf(x[e], x[e], sumSquares);
      }
    } else {
      for (int v = lane; v < normVecs; v += 32) {
        float x[VEC];
        unpack16<S>(load16(src + v * 16), x);
#pragma unroll
        for (int e = 0; e < VEC; e++) sumSquares = fmaf(x[e], x[e], sumSquares);
      }
    }
    const float inv = rsqrtf(sumOverLanes(sumSquares, 32) / static_cast<float>(C) + static_cast<float>(p.normEps));
    const PoolTarget pool = mlaTarget(p);
    const float2* cs = mlaAngles + t * half;
    auto write = [&](int v, uint4 raw) {
      float x[VEC];
      unpack16<S>(raw, x);
      if (v < normVecs) {
        float w[VEC];
        loadWeights<S>(p.kvNormWeight, static_cast<long long>(v) * VEC, weightIsF32, w);
#pragma unroll
        for (int e = 0; e < VEC; e++) x[e] = x[e] * inv * w[e];
      } else {
        const int e0 = (v - normVecs) * VEC;
        float partner[VEC];
        if (!gptj) unpack16<S>(load16(src + (e0 < half ? v + partnerVecs : v - partnerVecs) * 16), partner);
        mlaRotate<VEC>(x, partner, e0, half, gptj, cs);
      }
      storePoolVector<S>(pool, slot * (C + R) + static_cast<long long>(v) * VEC, pack16<S>(x));
    };
    if (held) {
#pragma unroll
      for (int k = 0; k < kHeld; k++) {
        const int v = lane + 32 * k;
        if (v < rowVecs) write(v, bits[k]);
      }
    } else {
      for (int v = lane; v < rowVecs; v += 32) write(v, load16(src + v * 16));
    }
  }

  if (p.q == nullptr) return;
  // The block's query vectors u = (token t, head h, vector c), row-major; thread x takes u = x + k · blockDim.x.
  // (t, h, c) advances by the fixed step with carries, so no vector pays an integer division.
  const unsigned Hq = static_cast<unsigned>(p.numQoHeads);
  const unsigned Dq = static_cast<unsigned>(p.qHeadDim);
  const unsigned headVecs = Dq / VEC;
  const unsigned nopeVecs = (Dq - R) / VEC;
  const unsigned stepRows = blockDim.x / headVecs, stepC = blockDim.x - stepRows * headVecs;
  const unsigned stepT = stepRows / Hq, stepH = stepRows - stepT * Hq;
  unsigned c = threadIdx.x % headVecs, t = threadIdx.x / headVecs / Hq, h = threadIdx.x / headVecs - t * Hq;
  auto advance = [&]() {
    c += stepC;
    const unsigned carry = c >= headVecs ? 1u : 0u;
    c -= carry * headVecs;
    h += stepH + carry;
    t += stepT;
    if (h >= Hq) {
      h -= Hq;
      t += 1;
    }
  };
  const char* q = static_cast<const char*>(p.q);
  char* qRot = static_cast<char*>(p.qRot);
  auto qElement = [&](unsigned t, unsigned h, unsigned c) { return (first + t) * p.qTokenStride + static_cast<long long>(h) * p.qHeadStride + static_cast<long long>(c) * VEC; };
  while (t < static_cast<unsigned>(tokens)) {
    uint4 bits[kMlaQueryBatch];
    unsigned tb[kMlaQueryBatch], hb[kMlaQueryBatch], cb[kMlaQueryBatch];
#pragma unroll
    for (int b = 0; b < kMlaQueryBatch; b++) {
      tb[b] = t;
      hb[b] = h;
      cb[b] = c;
      if (t < static_cast<unsigned>(tokens)) bits[b] = loadOnce16(q + qElement(t, h, c) * EB);
      advance();
    }
#pragma unroll
    for (int b = 0; b < kMlaQueryBatch; b++) {
      if (tb[b] >= static_cast<unsigned>(tokens)) break;
      if (cb[b] >= nopeVecs) {
        const int e0 = static_cast<int>(cb[b] - nopeVecs) * VEC;
        float x[VEC], partner[VEC];
        unpack16<S>(bits[b], x);
        if (!gptj) unpack16<S>(load16(q + (qElement(tb[b], hb[b], cb[b]) + (e0 < half ? partnerVecs : -partnerVecs) * VEC) * EB), partner);
        mlaRotate<VEC>(x, partner, e0, half, gptj, mlaAngles + tb[b] * half);
        bits[b] = pack16<S>(x);
      }
      // qRot is contiguous: row (first + t) · Hq + h, vector c.
      storeOnce16(qRot + (((first + tb[b]) * Hq + hb[b]) * Dq + static_cast<long long>(cb[b]) * VEC) * EB, bits[b]);
    }
  }
}

// Any shape and strides (elements contiguous within a row): a warp per (token, row), row 0 the latent, row 1 + h query head h.
template <typename S>
__device__ __forceinline__ void mlaPoolAnyShape(const MlaPoolParams& p) {
  using Bits = typename S::Bits;
  const long long C = p.kvLoraRank, R = p.ropeDim, W = C + R, Hq = p.numQoHeads, Dq = p.qHeadDim;
  const long long half = R >> 1;
  const long long rowsPerToken = 1 + (p.q != nullptr ? Hq : 0);
  const int lane = threadIdx.x & 31;
  const long long warps = static_cast<long long>(gridDim.x) * (blockDim.x >> 5);
  const unsigned* table = static_cast<const unsigned*>(p.ropeAngles);
  // Element e of a RoPE part of `count` values at `base`, rotated: its pair's partner and angle.
  auto rotated = [&](const void* src, long long base, long long e, long long position) {
    const bool gptj = p.gptj != 0;
    const bool firstOfPair = gptj ? (e & 1) == 0 : e < half;
    const long long other = gptj ? (firstOfPair ? e + 1 : e - 1) : (firstOfPair ? e + half : e - half);
    const int j = static_cast<int>(gptj ? e >> 1 : (firstOfPair ? e : e - half));
    float c, s;
    ropeCosSin(position, j, table, c, s);
    return rotatedElement(loadElement<S>(src, base + e), loadElement<S>(src, base + other), c, firstOfPair ? -s : s);
  };
  for (long long row = (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; row < p.numTokens * rowsPerToken; row += warps) {
    const long long n = row / rowsPerToken;
    const long long y = row - n * rowsPerToken;
    const long long position = loadIndex(p.positions, p.positionsAreI64, n);
    if (y == 0) {
      const long long srcFirst = n * p.latentTokenStride;
      float sumSquares = 0.0f;
      for (long long e = lane; e < C; e += 32) {
        const float x = loadElement<S>(p.kvLatent, srcFirst + e);
        sumSquares = fmaf(x, x, sumSquares);
      }
      const float inv = rsqrtf(sumOverLanes(sumSquares, 32) / static_cast<float>(C) + static_cast<float>(p.normEps));
      const long long slot = mlaSlot(p, n);
      if (slot < 0) continue;
      const PoolTarget pool = mlaTarget(p);
      const bool weightIsF32 = p.kvNormWeightIsF32 != 0;
      for (long long e = lane; e < W; e += 32) {
        const float out = e < C ? loadElement<S>(p.kvLatent, srcFirst + e) * inv * (weightIsF32 ? loadElement<F32>(p.kvNormWeight, e) : loadElement<S>(p.kvNormWeight, e))
                                : rotated(p.kvLatent, srcFirst + C, e - C, position);
        storePoolElement<S>(pool, slot * W + e, S::fromFloat(out));
      }
      continue;
    }
    const long long h = y - 1;
    const long long srcFirst = n * p.qTokenStride + h * p.qHeadStride;
    Bits* dst = static_cast<Bits*>(p.qRot) + (n * Hq + h) * Dq;
    for (long long e = lane; e < Dq; e += 32) {
      if (e < Dq - R) dst[e] = static_cast<const Bits*>(p.q)[srcFirst + e];
      else dst[e] = S::fromFloat(rotated(p.q, srcFirst + Dq - R, e - (Dq - R), position));
    }
  }
}

}  // namespace kvkit

using kvkit::MlaPoolAnyLaunch;
using kvkit::MlaPoolParams;
using kvkit::MlaPoolVecLaunch;

// Launched after the call's value check and claim_slots on the stream: a call the check rejected writes nothing.
#define KVKIT_MLA_POOL_ENTRIES(name, S)                                                                                      \
  extern "C" __global__ void __launch_bounds__(MlaPoolVecLaunch::kThreads, MlaPoolVecLaunch::kMinBlocksPerSM) mla_pool_##name##_vec(const MlaPoolParams p) { \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                     \
    kvkit::mlaPoolVectors<S>(p);                                                                                             \
  }                                                                                                                          \
  extern "C" __global__ void __launch_bounds__(MlaPoolAnyLaunch::kThreads) mla_pool_##name##_any(const MlaPoolParams p) { \
    if (kvkit::callRejected(p.badValue, p.call)) return;                                                                     \
    kvkit::mlaPoolAnyShape<S>(p);                                                                                            \
  }

KVKIT_MLA_POOL_ENTRIES(f32, kvkit::F32)
KVKIT_MLA_POOL_ENTRIES(f16, kvkit::F16)
KVKIT_MLA_POOL_ENTRIES(bf16, kvkit::Bf16)
