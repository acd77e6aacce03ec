// Device-side value checks: check_values.cu tests a call's rules before any of
// its kernels writes; a value that breaks one is recorded for the host's next
// sync() and the call marked rejected, so its kernels write nothing
// (callRejected). The kernels still skip a bad token rather than reach
// outside a tensor, whatever the order of work.
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


// Whether this call's value check failed: then none of its kernels writes anything.
// Read once the check has ended: the grid ahead of this one, or the one that grid waits for
// (waitForPreviousGrid first where this grid may start beside it). From L2, where the check wrote it.
__device__ __forceinline__ bool callRejected(const BadValueRecord* record, long long call) {
  return call != 0 && __ldcg(&record->rejectedCall) == static_cast<int>(call);
}

}  // namespace kvkit
