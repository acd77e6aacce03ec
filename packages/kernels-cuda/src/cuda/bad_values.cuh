// Device-side value checks: a token whose position or slot is out of range, or
// a layer whose eps is not finite and >= 0, is not written; the first such one
// is recorded for the host's next sync().
#pragma once
#include "generated/params.cuh"

namespace kvkit {

// Keeps the smallest (check, token) key and its value. Rare (only bad input
// gets here), so a short lock keeps key and value together.
__device__ __forceinline__ void recordBadValue(BadValueRecord* record, long long check, long long token, long long value) {
  const unsigned long long key = (static_cast<unsigned long long>(check) << 32) | static_cast<unsigned long long>(token & 0xffffffffll);
  volatile BadValueRecord* seen = record;
  if (key >= seen->key) return;
  while (atomicCAS(&record->lock, 0, 1) != 0) __nanosleep(64);
  __threadfence();
  if (key < seen->key) {
    seen->key = key;
    seen->value = value;
  }
  __threadfence();
  atomicExch(&record->lock, 0);
}

// eps must be finite and >= 0 (-0 included); tested on the bits, so no fast-math folding can drop it.
__device__ __forceinline__ bool epsIsValid(float eps) {
  const unsigned bits = __float_as_uint(eps);
  return bits < 0x7f800000u || bits == 0x80000000u;
}

// Records layer `layer`'s bad eps under the eps rule's check number; the value is the float's bits.
__device__ __forceinline__ void recordBadEps(BadValueRecord* record, long long check, long long layer, float eps) {
  recordBadValue(record, check, layer, static_cast<long long>(__float_as_uint(eps)));
}

}  // namespace kvkit
