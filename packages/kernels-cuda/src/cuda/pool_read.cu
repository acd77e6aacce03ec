// dequantizeKv (ops/kvPools.ts): rows of a pool of any layout and dtype at the slots, decoded (fp8: times the scale).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "kv_pool.cuh"

using kvkit::PoolReadParams;

// One thread per element of rows [N, H, D], grid-stride.
extern "C" __global__ void __launch_bounds__(kvkit::PoolReadLaunch::kThreads) pool_read(const PoolReadParams p) {
  if (kvkit::callRejected(p.badValue, p.call)) return;  // the call's value check, launched just before, failed
  const long long perSlot = p.heads * p.headDim;
  const long long total = p.count * perSlot;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long n = i / perSlot;
    const long long e = i - n * perSlot;
    const long long h = e / p.headDim;
    const long long slot = kvkit::loadIndex(p.slots, p.slotsAreI64, n);
    // A slot past the pool rejected the call (check_values); skipped all the same, so no read leaves the pool.
    if (slot >= p.slotBelow || slot < 0) continue;
    const long long at = kvkit::poolElement(p.headMajor != 0, slot, h, p.heads, p.headDim, p.pageSize) + (e - h * p.headDim);
    float value;
    if (p.poolDType >= 3) value = __fmul_rn(kvkit::fp8ToFloat(static_cast<const uint8_t*>(p.pool)[at], p.poolDType == 3), p.scale[p.perHeadScale ? h : 0]);
    else value = kvkit::loadAnyFloat(p.pool, p.poolDType, at);
    if (p.rowsDType == kvkit::kF32) kvkit::storeElement<kvkit::F32>(p.rows, i, value);
    else if (p.rowsDType == kvkit::kF16) kvkit::storeElement<kvkit::F16>(p.rows, i, value);
    else kvkit::storeElement<kvkit::Bf16>(p.rows, i, value);
  }
}
