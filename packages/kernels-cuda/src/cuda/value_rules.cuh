// A call's value rules (positions, slots, eps, fp8 scales) as the device tests them: by check_values.cu
// before the call's kernels run, or, in a call small enough, by every block of its one kernel
// (blockFindsBadValue), which then needs no check launch ahead of it.
#pragma once
#include "bad_values.cuh"
#include "generated/params.cuh"

namespace kvkit {

struct ValueRule {
  const void* values;
  long long count, kind;
  double min, above, below;
  long long negativeSkips, finite, check;
};

// Rule r of a parameter block that carries the rule fields (CheckValuesParams, RopePoolParams).
#define KVKIT_VALUE_RULE(r) {p.values##r, p.count##r, p.kind##r, p.min##r, p.above##r, p.below##r, p.negativeSkips##r, p.finite##r, p.check##r}
static_assert(CheckValuesLaunch::kRules == 5, "valueRule names five rules");
template <typename P>
__device__ __forceinline__ ValueRule valueRule(const P& p, int r) {
  switch (r) {
    case 0: return KVKIT_VALUE_RULE(0);
    case 1: return KVKIT_VALUE_RULE(1);
    case 2: return KVKIT_VALUE_RULE(2);
    case 3: return KVKIT_VALUE_RULE(3);
    default: return KVKIT_VALUE_RULE(4);
  }
}
#undef KVKIT_VALUE_RULE

// Value i of the rule's raw bits: a float's bits, or the integer.
__device__ __forceinline__ long long ruleBits(const ValueRule& r, long long i) {
  if (r.kind == 2) return static_cast<long long>(__float_as_uint(static_cast<const float*>(r.values)[i]));
  return r.kind == 1 ? static_cast<const long long*>(r.values)[i] : static_cast<long long>(static_cast<const int*>(r.values)[i]);
}

// Whether a value, as ruleBits gives it, breaks the rule (compared as a double: exact for the bounds an index has).
__device__ __forceinline__ bool bitsBreakRule(const ValueRule& r, long long bits) {
  double v;
  if (r.kind == 2) {
    const unsigned u = static_cast<unsigned>(bits);
    // Tested on the bits, so no fast-math folding can drop a NaN or an infinity.
    if (r.finite && (u & 0x7f800000u) == 0x7f800000u) return true;
    v = static_cast<double>(__uint_as_float(u));
  } else {
    v = static_cast<double>(bits);
  }
  if (r.negativeSkips && v < 0) return false;
  return v < r.min || !(v > r.above) || v >= r.below;
}

__device__ __forceinline__ bool breaksRule(const ValueRule& r, long long i, long long& bits) {
  bits = ruleBits(r, i);
  return bitsBreakRule(r, bits);
}

// Whether the kernel's parameters carry the call's rules (a one-launch call), which it then tests itself.
template <typename P>
__device__ __forceinline__ bool testsOwnRules(const P& p) {
  return p.values0 != nullptr || p.values1 != nullptr || p.values2 != nullptr || p.values3 != nullptr || p.values4 != nullptr;
}

// Whether any of the call's rules in `p` breaks, tested by this block over all their values; every thread of
// the block calls it, after the grid ahead has ended. Block 0 records what it finds as check_values would
// (the smallest check and token, the call marked rejected); the other blocks only learn not to write. No
// rules (the call was checked by check_values, or has none): false, at no cost.
template <typename P>
__device__ __forceinline__ bool blockFindsBadValue(const P& p) {
  if (!testsOwnRules(p)) return false;
  bool broke = false;
  for (int r = 0; r < CheckValuesLaunch::kRules; r++) {
    const ValueRule rule = valueRule(p, r);
    if (rule.values == nullptr) continue;
    for (long long i = threadIdx.x; i < rule.count; i += blockDim.x) {
      long long bits;
      if (!breaksRule(rule, i, bits)) continue;
      broke = true;
      if (blockIdx.x == 0) recordBadValue(p.badValue, rule.check, i, bits);
    }
  }
  broke = __syncthreads_or(broke);
  if (broke && blockIdx.x == 0 && threadIdx.x == 0) *reinterpret_cast<volatile int*>(&p.badValue->rejectedCall) = static_cast<int>(p.call);
  return broke;
}

}  // namespace kvkit
