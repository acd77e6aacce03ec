// One call's offsets rules (pagedAttention's qIndptr and kvIndptr), checked beside its value rules before any
// of its kernels reads them: a break is recorded in BadValueRecord as check_values records a bad value, and the
// call marked rejected. Decoded on the host by offsetsRuleError / segmentsWithinError (runtime/badValues.ts).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "storage.cuh"

namespace kvkit {

// Offsets rule break kinds, as the host decodes them: entry 0 is not 0, below the entry before, the last is not the total.
enum OffsetsBreak : int { kBreakStart = 0, kBreakDecreasing = 1, kBreakEnd = 2 };

__device__ __forceinline__ void recordBreak(const CheckSegmentsParams& p, long long check, long long entry, long long value) {
  recordBadValue(p.badValue, check, entry, value);
  *reinterpret_cast<volatile int*>(&p.badValue->rejectedCall) = static_cast<int>(p.call);
}

// Entry i of one indptr (value v, the entry before it `before`) against its rule; the first way it breaks, as the host tests them.
__device__ __forceinline__ void checkOffsets(const CheckSegmentsParams& p, long long check, long long i, long long v, long long before, long long total) {
  if (check < 0) return;
  int how = -1;
  if (i == 0) {
    if (v != 0) how = kBreakStart;
  } else if (v < before) {
    how = kBreakDecreasing;
  }
  if (how < 0 && i == p.entries - 1 && v != total) how = kBreakEnd;
  // The entry's value times 4 plus the way it broke: the host takes the low two bits back off.
  if (how >= 0) recordBreak(p, check, i, static_cast<long long>(static_cast<unsigned long long>(v) * 4ull + static_cast<unsigned long long>(how)));
}

}  // namespace kvkit

extern "C" __global__ void __launch_bounds__(kvkit::CheckSegmentsLaunch::kThreads) check_segments(const kvkit::CheckSegmentsParams p) {
  // Behind the call's value check (which waits for the work ahead), and ahead of the kernels that read the offsets.
  kvkit::waitForPreviousGrid();
  kvkit::letNextGridLaunch();
  const long long qIs64 = p.indptrAreI64 & 1, kvIs64 = (p.indptrAreI64 >> 1) & 1;
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.entries; i += stride) {
    const long long q = kvkit::loadIndex(p.qIndptr, qIs64, i);
    const long long kv = kvkit::loadIndex(p.kvIndptr, kvIs64, i);
    const long long qBefore = i > 0 ? kvkit::loadIndex(p.qIndptr, qIs64, i - 1) : 0;
    const long long kvBefore = i > 0 ? kvkit::loadIndex(p.kvIndptr, kvIs64, i - 1) : 0;
    kvkit::checkOffsets(p, p.qCheck, i, q, qBefore, p.qTotal);
    kvkit::checkOffsets(p, p.kvCheck, i, kv, kvBefore, p.kvTotal);
    if (p.withinCheck >= 0 && i + 1 < p.entries) {
      // Request i; meaningful only where both offsets rules hold, which the host reports first (lower check numbers).
      const long long qLen = kvkit::loadIndex(p.qIndptr, qIs64, i + 1) - q;
      const long long kvLen = kvkit::loadIndex(p.kvIndptr, kvIs64, i + 1) - kv;
      if (qLen > kvLen) {
        const unsigned long long packed = (static_cast<unsigned long long>(qLen) << 32) | (static_cast<unsigned long long>(kvLen) & 0xffffffffull);
        kvkit::recordBreak(p, p.withinCheck, i, static_cast<long long>(packed));
      }
    }
  }
}
