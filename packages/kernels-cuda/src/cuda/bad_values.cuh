// Device-side value checks: a token whose position or slot is out of range is
// not written; the first such token is recorded for the host's next sync().
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

}  // namespace kvkit
