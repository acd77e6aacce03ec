// The pass before a pool write: for each slot named by several tokens of a call, the last token owns it.
#include "generated/params.cuh"
#include "grid_order.cuh"
#include "slot_owners.cuh"
#include "storage.cuh"

extern "C" __global__ void __launch_bounds__(kvkit::ClaimSlotsLaunch::kThreads) claim_slots(const kvkit::ClaimSlotsParams p) {
  // The pool-writing grid after this one may start now: it waits for these claims only where it needs them.
  kvkit::letNextGridLaunch();
  const long long n = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (n < p.numTokens) {
    const long long slot = kvkit::loadIndex(p.slots, p.slotsAreI64, n);
    if (slot >= 0 && slot < p.slotBelow) kvkit::claimSlot(p.slotOwners, p.slotOwnersMask, p.generation, slot, n);
  }
  // Launched beside the call's value check (which only records a verdict), this grid ends after it, so the
  // grid behind, which waits for this one, reads the verdict once it is final.
  kvkit::waitForPreviousGrid();
}
