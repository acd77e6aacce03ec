// One call's value rules (positions, slots, eps, fp8 scales), checked before any kernel of the call writes:
// a value that breaks its rule is recorded and the call marked rejected (bad_values.cuh).
#include "bad_values.cuh"
#include "generated/params.cuh"
#include "grid_order.cuh"

namespace kvkit {

struct ValueRule {
  const void* values;
  long long count, kind;
  double min, above, below;
  long long negativeSkips, finite, check;
};

#define KVKIT_VALUE_RULE(r) {p.values##r, p.count##r, p.kind##r, p.min##r, p.above##r, p.below##r, p.negativeSkips##r, p.finite##r, p.check##r}
static_assert(CheckValuesLaunch::kRules == 5, "valueRule names five rules");
__device__ __forceinline__ ValueRule valueRule(const CheckValuesParams& p, int r) {
  switch (r) {
    case 0: return KVKIT_VALUE_RULE(0);
    case 1: return KVKIT_VALUE_RULE(1);
    case 2: return KVKIT_VALUE_RULE(2);
    case 3: return KVKIT_VALUE_RULE(3);
    default: return KVKIT_VALUE_RULE(4);
  }
}
#undef KVKIT_VALUE_RULE

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
  return v < r.min || !(v > r.above) || v >= r.below;
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
