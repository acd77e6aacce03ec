// One call's value rules (positions, slots, eps), checked before any kernel of the call writes:
// a value that breaks its rule is recorded and the call marked rejected (bad_values.cuh).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"

namespace kvkit {

struct ValueRule {
  const void* values;
  long long count, kind;
  double min, below;
  long long negativeSkips, finite, check;
};

__device__ __forceinline__ ValueRule valueRule(const CheckValuesParams& p, int r) {
  if (r == 0) return {p.values0, p.count0, p.kind0, p.min0, p.below0, p.negativeSkips0, p.finite0, p.check0};
  if (r == 1) return {p.values1, p.count1, p.kind1, p.min1, p.below1, p.negativeSkips1, p.finite1, p.check1};
  return {p.values2, p.count2, p.kind2, p.min2, p.below2, p.negativeSkips2, p.finite2, p.check2};
}

// Value i of the rule as a double (exact for the bounds an index is compared with), and its raw bits for the record.
__device__ __forceinline__ bool breaksRule(const ValueRule& r, long long i, long long& bits) {
  double v;
  if (r.kind == 2) {
    const float f = static_cast<const float*>(r.values)[i];
    bits = static_cast<long long>(__float_as_uint(f));
    // Tested on the bits, so no fast-math folding can drop a NaN or an infinity.
    if (r.finite && (__float_as_uint(f) & 0x7f800000u) == 0x7f800000u) return true;
    v = static_cast<double>(f);
  } else {
    bits = r.kind == 1 ? static_cast<const long long*>(r.values)[i] : static_cast<long long>(static_cast<const int*>(r.values)[i]);
    v = static_cast<double>(bits);
  }
  if (r.negativeSkips && v < 0) return false;
  return v < r.min || v >= r.below;
}

}  // namespace kvkit

extern "C" __global__ void __launch_bounds__(kvkit::CheckValuesLaunch::kThreads) check_values(const kvkit::CheckValuesParams p) {
  // Launched behind the grid ahead (which may write the values), it lets the call's kernel launch at once.
  kvkit::waitForPreviousGrid();
  kvkit::letNextGridLaunch();
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (int r = 0; r < kvkit::CheckValuesLaunch::kRules; r++) {
    const kvkit::ValueRule rule = kvkit::valueRule(p, r);
    if (rule.values == nullptr) continue;
    for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < rule.count; i += stride) {
      long long bits;
      if (!kvkit::breaksRule(rule, i, bits)) continue;
      kvkit::recordBadValue(p.badValue, rule.check, i, bits);
      *reinterpret_cast<volatile int*>(&p.badValue->rejectedCall) = static_cast<int>(p.call);
    }
  }
}
