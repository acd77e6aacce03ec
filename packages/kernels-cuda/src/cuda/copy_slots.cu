// copySlots (ops/copySlots.ts): the K and V rows of each pair's source slot into its destination slot, every
// head, between pools of any layouts and dtypes. A head keeps its bits where both sides have one dtype and (fp8)
// one scale; otherwise its value (fp8: decode(code) · scale in f32) is stored rounded once (fp8: the code of
// value / scale, as the pool writes round it). Of the pairs naming one destination that are not skipped, the
// last writes it (copy_slots_claim); where the pools share storage, copy_slots_stage copies the source rows
// out first, so every row is read as it was before the call.
#include <stdint.h>

#include "bad_values.cuh"
#include "fp8.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

namespace kvkit {
namespace copy {

// Pool dtype codes past the FloatCodes.
constexpr long long kCodeE4m3 = 3, kCodeE5m2 = 4;

__device__ __forceinline__ int bytesOf(long long code) { return code >= kCodeE4m3 ? 1 : code == kF32 ? 4 : 2; }

__device__ __forceinline__ long long fromSlotOf(const CopySlotsParams& p, long long m) { return loadIndex(p.fromSlots, p.slotsAreI64 & 1, m); }
__device__ __forceinline__ long long toSlotOf(const CopySlotsParams& p, long long m) { return loadIndex(p.toSlots, (p.slotsAreI64 >> 1) & 1, m); }

// A pair that is not skipped: both slots non-negative (and inside their pools: a call with one outside is rejected).
__device__ __forceinline__ bool copies(const CopySlotsParams& p, long long from, long long to) {
  return from >= 0 && from < p.srcSlotBelow && to >= 0 && to < p.dstSlotBelow;
}

// Scale `which` (0: kSrc, 1: vSrc, 2: kDst, 3: vDst) of head h; 1 where that side is not fp8.
__device__ __forceinline__ float scaleOf(const CopySlotsParams& p, int which, long long h) {
  const float* s = which == 0 ? p.kSrcScale : which == 1 ? p.vSrcScale : which == 2 ? p.kDstScale : p.vDstScale;
  return s == nullptr ? 1.0f : __ldg(s + (((p.scalesPerHead >> which) & 1) ? h : 0));
}

// Whether head h of K (kv 0) or V keeps its bits: one dtype on both sides and, for fp8, the same scale.
__device__ __forceinline__ bool keepsBits(const CopySlotsParams& p, int kv, long long h) {
  if (p.srcDType != p.dstDType) return false;
  return p.srcDType < kCodeE4m3 || __float_as_uint(scaleOf(p, kv, h)) == __float_as_uint(scaleOf(p, 2 + kv, h));
}

__device__ __forceinline__ float valueOf(const void* base, long long code, long long i, float scale) {
  if (code >= kCodeE4m3) return __fmul_rn(fp8ToFloat(static_cast<const uint8_t*>(base)[i], code == kCodeE4m3), scale);
  return loadAnyFloat(base, code, i);
}

__device__ __forceinline__ void storeValue(void* base, long long code, long long i, float x, float scale) {
  if (code >= kCodeE4m3) static_cast<uint8_t*>(base)[i] = static_cast<uint8_t>(fp8OfFloat(poolQuotient(x, scale), code == kCodeE4m3));
  else if (code == kF32) storeElement<F32>(base, i, x);
  else if (code == kF16) storeElement<F16>(base, i, x);
  else storeElement<Bf16>(base, i, x);
}

__device__ __forceinline__ void copyBits(void* to, long long ti, const void* from, long long fi, int bytes) {
  if (bytes == 1) static_cast<uint8_t*>(to)[ti] = static_cast<const uint8_t*>(from)[fi];
  else if (bytes == 2) static_cast<uint16_t*>(to)[ti] = static_cast<const uint16_t*>(from)[fi];
  else static_cast<uint32_t*>(to)[ti] = static_cast<const uint32_t*>(from)[fi];
}

/** Where pair m's rows are read and written: element 0 of each side's head-0 row, and the elements between heads. */
struct PairRows {
  const char* srcK;
  const char* srcV;
  char* dstK;
  char* dstV;
  long long srcRow, srcHead, dstRow, dstHead;
  __device__ __forceinline__ const char* src(int kv) const { return kv ? srcV : srcK; }
  __device__ __forceinline__ char* dst(int kv) const { return kv ? dstV : dstK; }
};

// `staged`: read from staging row m (as copy_slots_stage left it); `intoStaging`: write there instead of the destination.
__device__ __forceinline__ PairRows pairRows(const CopySlotsParams& p, long long m, long long from, long long to, bool staged, bool intoStaging) {
  const long long H = p.numKvHeads, D = p.headDim;
  PairRows r;
  if (staged) {
    // Staging row (m, kv, h) at ((m · 2 + kv) · H + h) · D: V's rows H·D after K's.
    r.srcK = static_cast<const char*>(p.staging);
    r.srcV = r.srcK + H * D * bytesOf(p.srcDType);
    r.srcRow = 2 * m * H * D;
    r.srcHead = D;
  } else {
    r.srcK = static_cast<const char*>(p.kSrc);
    r.srcV = static_cast<const char*>(p.vSrc);
    r.srcRow = poolSlotElement(p.srcHeadMajor != 0, from, H, D, p.srcPageSize);
    r.srcHead = poolHeadStride(p.srcHeadMajor != 0, D, p.srcPageSize);
  }
  if (intoStaging) {
    r.dstK = static_cast<char*>(p.staging);
    r.dstV = r.dstK + H * D * bytesOf(p.srcDType);
    r.dstRow = 2 * m * H * D;
    r.dstHead = D;
  } else {
    r.dstK = static_cast<char*>(p.kDst);
    r.dstV = static_cast<char*>(p.vDst);
    r.dstRow = poolSlotElement(p.dstHeadMajor != 0, to, H, D, p.dstPageSize);
    r.dstHead = poolHeadStride(p.dstHeadMajor != 0, D, p.dstPageSize);
  }
  return r;
}

/**
 * One warp's pair: its 2·H head rows, as bits (16 bytes a lane at a time where `p.vectors`, four loads in flight
 * before their stores) or value by value. `bitsOnly`: every row keeps its bits (the staging copy).
 */
__device__ __forceinline__ void copyPair(const CopySlotsParams& p, const PairRows& r, bool bitsOnly, int lane) {
  const int H = static_cast<int>(p.numKvHeads), D = static_cast<int>(p.headDim);
  const int bytes = bytesOf(p.srcDType);
  constexpr int kAhead = 4;
  if (p.vectors != 0) {
    const int perRow = D * bytes / 16, perKv = H * perRow, total = 2 * perKv;
    for (int first = 0; first < total; first += 32 * kAhead) {
      uint4 v[kAhead];
      char* into[kAhead];
#pragma unroll
      for (int u = 0; u < kAhead; u++) {
        const int i = first + u * 32 + lane;
        const int kv = i >= perKv ? 1 : 0;
        const int rest = i - kv * perKv;
        const int h = rest / perRow, c = rest - h * perRow;
        into[u] = nullptr;
        if (i < total && (bitsOnly || keepsBits(p, kv, h))) {
          v[u] = loadOnce16(r.src(kv) + (r.srcRow + h * r.srcHead) * bytes + c * 16);
          into[u] = r.dst(kv) + (r.dstRow + h * r.dstHead) * bytes + c * 16;
        }
      }
#pragma unroll
      for (int u = 0; u < kAhead; u++)
        if (into[u] != nullptr) storeOnce16(into[u], v[u]);
    }
    if (bitsOnly) return;
  }
  const int perKv = H * D, total = 2 * perKv;
  for (int i = lane; i < total; i += 32) {
    const int kv = i >= perKv ? 1 : 0;
    const int rest = i - kv * perKv;
    const int h = rest / D, e = rest - h * D;
    const bool bits = bitsOnly || keepsBits(p, kv, h);
    // Rows kept as bits went 16 bytes at a time above.
    if (bits && p.vectors != 0) continue;
    const long long from = r.srcRow + h * r.srcHead + e, to = r.dstRow + h * r.dstHead + e;
    if (bits) copyBits(r.dst(kv), to, r.src(kv), from, bytes);
    else storeValue(r.dst(kv), p.dstDType, to, valueOf(r.src(kv), p.srcDType, from, scaleOf(p, kv, h)), scaleOf(p, 2 + kv, h));
  }
}

__device__ __forceinline__ long long warpsInGrid() { return static_cast<long long>(gridDim.x) * (blockDim.x >> 5); }
__device__ __forceinline__ long long firstWarp() { return (static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5; }

}  // namespace copy
}  // namespace kvkit

using kvkit::CopySlotsParams;

// Every copySlots kernel runs behind the grid ahead (the call's value check, or the previous step): each waits for
// it before touching memory and reads the verdict; a rejected call writes nothing.
extern "C" __global__ void __launch_bounds__(kvkit::CopySlotsClaimLaunch::kThreads) copy_slots_claim(const CopySlotsParams p) {
  kvkit::waitForPreviousGrid();
  kvkit::letNextGridLaunch();
  if (kvkit::callRejected(p.badValue, p.call)) return;
  const long long m = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (m >= p.numPairs) return;
  const long long from = kvkit::copy::fromSlotOf(p, m), to = kvkit::copy::toSlotOf(p, m);
  // A skipped pair claims nothing, so the last pair that copies is the one that writes the slot.
  if (kvkit::copy::copies(p, from, to)) kvkit::claimSlot(p.slotOwners, p.slotOwnersMask, p.generation, to, m);
}

extern "C" __global__ void __launch_bounds__(kvkit::CopySlotsStageLaunch::kThreads) copy_slots_stage(const CopySlotsParams p) {
  kvkit::waitForPreviousGrid();
  kvkit::letNextGridLaunch();
  if (kvkit::callRejected(p.badValue, p.call)) return;
  const int lane = threadIdx.x & 31;
  for (long long m = kvkit::copy::firstWarp(); m < p.numPairs; m += kvkit::copy::warpsInGrid()) {
    const long long from = kvkit::copy::fromSlotOf(p, m), to = kvkit::copy::toSlotOf(p, m);
    if (!kvkit::copy::copies(p, from, to)) continue;
    kvkit::copy::copyPair(p, kvkit::copy::pairRows(p, m, from, to, false, true), true, lane);
  }
}

extern "C" __global__ void __launch_bounds__(kvkit::CopySlotsLaunch::kThreads) copy_slots(const CopySlotsParams p) {
  kvkit::waitForPreviousGrid();
  kvkit::letNextGridLaunch();
  if (kvkit::callRejected(p.badValue, p.call)) return;
  const int lane = threadIdx.x & 31;
  for (long long m = kvkit::copy::firstWarp(); m < p.numPairs; m += kvkit::copy::warpsInGrid()) {
    const long long from = kvkit::copy::fromSlotOf(p, m), to = kvkit::copy::toSlotOf(p, m);
    if (!kvkit::copy::copies(p, from, to)) continue;
    if (p.slotOwners != nullptr && !kvkit::ownsSlot(p.slotOwners, p.slotOwnersMask, p.generation, to, m)) continue;
    kvkit::copy::copyPair(p, kvkit::copy::pairRows(p, m, from, to, p.staging != nullptr, false), false, lane);
  }
}
