// One call's value rules (positions, slots, eps, fp8 scales), checked before any kernel of the call writes:
// a value that breaks its rule is recorded and the call marked rejected (bad_values.cuh).
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "value_rules.cuh"

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
