// KV pools of any layout and dtype (ops/kvPools.ts): head rows [L, T, H, D] of the model dtype into a pool
// at the slots (NHD or HND; bits copied, or fp8 codes of x / scale), and dequantizeKv's rows back out.
#include "bad_values.cuh"
#include "fp8.cuh"
#include "generated/params.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

namespace kvkit {

// The first element of head `head` of `slot` in layer `layer`: NHD ((l*S + s)*H + h)*D; HND page s / pageSize, row s % pageSize.
__device__ __forceinline__ long long poolElement(bool headMajor, long long layer, long long slot, long long head, long long S, long long H, long long D, long long pageSize) {
  if (!headMajor) return ((layer * S + slot) * H + head) * D;
  const long long page = slot / pageSize;
  return (((layer * (S / pageSize) + page) * H + head) * pageSize + (slot - page * pageSize)) * D;
}

__device__ __forceinline__ void storeStoredBits(void* base, long long i, long long dtype, const void* src, long long si) {
  if (dtype == kF32) copyElement<F32>(base, i, src, si);
  else copyElement<F16>(base, i, src, si);  // f16 and bf16 alike: 16 bits copied
}

}  // namespace kvkit

using kvkit::PoolReadParams;
using kvkit::PoolStoreParams;

// One thread per element of the source, grid-stride; byte and half stores never touch a neighbour's bytes.
extern "C" __global__ void __launch_bounds__(kvkit::PoolStoreLaunch::kThreads) pool_store(const PoolStoreParams p) {
  const long long perToken = p.heads * p.headDim;
  const long long perLayer = p.tokens * perToken;
  const long long total = p.layers * perLayer;
  const bool fp8 = p.poolDType != 0;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long l = i / perLayer;
    const long long t = (i - l * perLayer) / perToken;
    const long long e = i - l * perLayer - t * perToken;
    const long long h = e / p.headDim;
    const long long slot = kvkit::loadIndex(p.slots, p.slotsAreI64, t);
    if (slot >= p.slotBelow) {
      if (l == 0 && e == 0) kvkit::recordBadValue(p.badValue, p.slotCheck, t, slot);
      continue;
    }
    if (slot < 0) continue;
    if (p.slotOwners != nullptr && !kvkit::ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, slot, t)) continue;
    const long long dst = kvkit::poolElement(p.headMajor != 0, l, slot, h, p.slotBelow, p.heads, p.headDim, p.pageSize) + (e - h * p.headDim);
    const long long src = l * p.sourceLayerElements + t * p.sourceTokenStride + h * p.sourceHeadStride + (e - h * p.headDim) * p.sourceElementStride;
    if (!fp8) {
      kvkit::storeStoredBits(p.pool, dst, p.sourceDType, p.source, src);
      continue;
    }
    const float x = kvkit::loadAnyFloat(p.source, p.sourceDType, src);
    const float q = __fdiv_rn(x, p.scale[p.perHeadScale ? h : 0]);
    static_cast<uint8_t*>(p.pool)[dst] = static_cast<uint8_t>(kvkit::fp8OfFloat(q, p.poolDType == 1));
  }
}

// dequantizeKv: one thread per element of rows [N, H, D], grid-stride.
extern "C" __global__ void __launch_bounds__(kvkit::PoolReadLaunch::kThreads) pool_read(const PoolReadParams p) {
  const long long perSlot = p.heads * p.headDim;
  const long long total = p.count * perSlot;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < total; i += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long n = i / perSlot;
    const long long e = i - n * perSlot;
    const long long h = e / p.headDim;
    const long long slot = kvkit::loadIndex(p.slots, p.slotsAreI64, n);
    if (slot >= p.slotBelow) {
      if (e == 0) kvkit::recordBadValue(p.badValue, p.slotCheck, n, slot);
      continue;
    }
    if (slot < 0) continue;
    const long long at = kvkit::poolElement(p.headMajor != 0, 0, slot, h, p.slotBelow, p.heads, p.headDim, p.pageSize) + (e - h * p.headDim);
    float value;
    if (p.poolDType >= 3) value = __fmul_rn(kvkit::fp8ToFloat(static_cast<const uint8_t*>(p.pool)[at], p.poolDType == 3), p.scale[p.perHeadScale ? h : 0]);
    else value = kvkit::loadAnyFloat(p.pool, p.poolDType, at);
    if (p.rowsDType == kvkit::kF32) kvkit::storeElement<kvkit::F32>(p.rows, i, value);
    else if (p.rowsDType == kvkit::kF16) kvkit::storeElement<kvkit::F16>(p.rows, i, value);
    else kvkit::storeElement<kvkit::Bf16>(p.rows, i, value);
  }
}
