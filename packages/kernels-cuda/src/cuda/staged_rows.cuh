// Rows in flight through shared memory (cp.async, sm_80+): a lane's 16-byte loads land in its own
// shared slots without holding registers, so a lane group can keep the next batch of rows loading
// while it works on this one. Each thread reads back only the slots it filled, so no barrier is needed.
#pragma once
#include <stdint.h>

namespace kvkit {

// An L2 policy that marks what it loads evict-first (read once per call, like loadOnce16).
__device__ __forceinline__ uint64_t evictFirstPolicy() {
  uint64_t policy;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

// Starts a copy of 16 bytes at `src` into this thread's slot `dst`; zeros where !here (src is then not read,
// but must still be a valid address).
__device__ __forceinline__ void stageOnce16(uint4* dst, const void* src, bool here, uint64_t policy) {
  const unsigned slot = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(slot), "l"(src), "r"(here ? 16 : 0), "l"(policy) : "memory");
}

// Closes the copies started since the last call into one batch (an empty batch where none were).
__device__ __forceinline__ void closeStagedBatch() { asm volatile("cp.async.commit_group;" ::: "memory"); }

// Waits until at most `inFlight` of this thread's closed batches are still loading.
template <int inFlight>
__device__ __forceinline__ void waitStagedBatches() {
  asm volatile("cp.async.wait_group %0;" ::"n"(inFlight) : "memory");
}

}  // namespace kvkit
