// dequantizeKv (ops/kvPools.ts): rows of a pool of any layout and dtype at the slots, decoded (fp8: times the scale).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "kv_pool.cuh"

namespace kvkit {

// Element v of a code's decoded value, as fp8ToFloat gives it: a table of the format's 256 values in shared memory.
struct Fp8Values {
  const float* table;
  __device__ __forceinline__ float operator()(uint32_t code) const { return table[code]; }
};

// Eight values of the pool at element `at` (a multiple of 8, the pool 16-byte aligned): its bits read once, decoded.
template <typename I>
__device__ __forceinline__ void loadEight(const PoolReadParams& p, I at, const Fp8Values& fp8, float scale, float (&x)[8]) {
  if (p.poolDType >= 3) {
    const uint2 codes = __ldcs(reinterpret_cast<const uint2*>(static_cast<const uint8_t*>(p.pool) + at));
#pragma unroll
    for (int u = 0; u < 8; u++) x[u] = __fmul_rn(fp8(((u < 4 ? codes.x : codes.y) >> (8 * (u & 3))) & 0xffu), scale);
  } else if (p.poolDType == kF32) {
    const float* from = static_cast<const float*>(p.pool) + at;
    float f[4];
    unpack16<F32>(loadOnce16(from), f);
#pragma unroll
    for (int u = 0; u < 4; u++) x[u] = f[u];
    unpack16<F32>(loadOnce16(from + 4), f);
#pragma unroll
    for (int u = 0; u < 4; u++) x[4 + u] = f[u];
  } else if (p.poolDType == kF16) {
    unpack16<F16>(loadOnce16(static_cast<const uint16_t*>(p.pool) + at), x);
  } else {
    unpack16<Bf16>(loadOnce16(static_cast<const uint16_t*>(p.pool) + at), x);
  }
}

// Eight values into rows at element `at`, rounded once to the rows' dtype, 16 bytes a store.
template <typename I>
__device__ __forceinline__ void storeEight(const PoolReadParams& p, I at, const float (&x)[8]) {
  if (p.rowsDType == kF32) {
    float* to = static_cast<float*>(p.rows) + at;
    const float lo[4] = {x[0], x[1], x[2], x[3]}, hi[4] = {x[4], x[5], x[6], x[7]};
    storeOnce16(to, pack16<F32>(lo));
    storeOnce16(to + 4, pack16<F32>(hi));
  } else if (p.rowsDType == kF16) {
    storeOnce16(static_cast<uint16_t*>(p.rows) + at, pack16<F16>(x));
  } else {
    storeOnce16(static_cast<uint16_t*>(p.rows) + at, pack16<Bf16>(x));
  }
}

// Eight elements a thread (D a multiple of 8, pool and rows 16-byte aligned: the host's rule), grid-stride; I the
// index type, 32 bits where every element index fits, so the divisions per group of eight stay cheap.
template <typename I>
__device__ __forceinline__ void poolReadEights(const PoolReadParams& p, const Fp8Values& fp8) {
  const I groupsPerHead = static_cast<I>(p.headDim / 8), heads = static_cast<I>(p.heads), D = static_cast<I>(p.headDim);
  const I groupsPerSlot = heads * groupsPerHead;
  const I total = static_cast<I>(p.count) * groupsPerSlot;
  const bool headMajor = p.headMajor != 0;
  for (I g = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; g < total; g += static_cast<I>(gridDim.x) * blockDim.x) {
    const I n = g / groupsPerSlot;
    const I inSlot = g - n * groupsPerSlot;
    const I h = inSlot / groupsPerHead;
    const I e = (inSlot - h * groupsPerHead) * 8;
    const long long slot = loadIndex(p.slots, p.slotsAreI64, n);
    // A slot past the pool rejected the call (check_values); skipped all the same, so no read leaves the pool.
    if (slot >= p.slotBelow || slot < 0) continue;
    const float scale = p.poolDType >= 3 ? __ldg(p.scale + (p.perHeadScale ? h : 0)) : 1.0f;
    float x[8];
    loadEight(p, static_cast<I>(poolElement(headMajor, slot, h, heads, D, p.pageSize)) + e, fp8, scale, x);
    storeEight(p, (n * heads + h) * D + e, x);
  }
}

}  // namespace kvkit

using kvkit::PoolReadParams;

// Any shape: one thread per element of rows [N, H, D], grid-stride. Rows of a multiple of 8 elements, 16-byte
// aligned: eight elements a thread (poolReadEights).
extern "C" __global__ void __launch_bounds__(kvkit::PoolReadLaunch::kThreads) pool_read(const PoolReadParams p) {
  if (kvkit::callRejected(p.badValue, p.call)) return;  // the call's value check, launched just before, failed
  __shared__ float fp8Table[256];
  if (p.poolDType >= 3) {
    for (int c = threadIdx.x; c < 256; c += blockDim.x) fp8Table[c] = kvkit::fp8ToFloat(static_cast<uint32_t>(c), p.poolDType == 3);
    __syncthreads();
  }
  const kvkit::Fp8Values fp8{fp8Table};
  if (p.eights != 0) {
    // Every pool and rows element index below 2^31: 32-bit arithmetic.
    if (p.largestElements < (1ll << 31)) kvkit::poolReadEights<unsigned>(p, fp8);
    else kvkit::poolReadEights<unsigned long long>(p, fp8);
    return;
  }
  const long long perSlot = p.heads * p.headDim;
  const long long total = p.count * perSlot;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long n = i / perSlot;
    const long long e = i - n * perSlot;
    const long long h = e / p.headDim;
    const long long slot = kvkit::loadIndex(p.slots, p.slotsAreI64, n);
    if (slot >= p.slotBelow || slot < 0) continue;
    const long long at = kvkit::poolElement(p.headMajor != 0, slot, h, p.heads, p.headDim, p.pageSize) + (e - h * p.headDim);
    float value;
    if (p.poolDType >= 3) value = __fmul_rn(fp8(static_cast<const uint8_t*>(p.pool)[at]), p.scale[p.perHeadScale ? h : 0]);
    else value = kvkit::loadAnyFloat(p.pool, p.poolDType, at);
    if (p.rowsDType == kvkit::kF32) kvkit::storeElement<kvkit::F32>(p.rows, i, value);
    else if (p.rowsDType == kvkit::kF16) kvkit::storeElement<kvkit::F16>(p.rows, i, value);
    else kvkit::storeElement<kvkit::Bf16>(p.rows, i, value);
  }
}
