// Two tokens naming one slot in a call: the last of them (highest token index,
// as a sequential loop would leave it) writes the whole slot row, the others
// none of it, so a pool row is never a mix of two tokens.
#pragma once
#include "generated/params.cuh"

namespace kvkit {

// Keys and owners carry the call's generation above 40 bits of slot (or token): 2^40 slots is
// more than any device holds (one 16-bit element a slot is 2 TiB), and 24 bits of generation
// wrap after 16M calls, when the host clears the table (src/runtime/slotOwners.ts).
constexpr int kSlotBits = 40;
constexpr unsigned long long kSlotMask = (1ull << kSlotBits) - 1;

__device__ __forceinline__ unsigned long long slotHash(long long slot, long long mask) {
  return ((static_cast<unsigned long long>(slot) * 0x9e3779b97f4a7c15ull) >> 29) & static_cast<unsigned long long>(mask);
}

// Inserts the slot (if new this generation) and raises its owner to `token`.
__device__ __forceinline__ void claimSlot(SlotOwner* table, long long mask, long long generation, long long slot, long long token) {
  const unsigned long long mine = (static_cast<unsigned long long>(generation) << kSlotBits) | static_cast<unsigned long long>(slot);
  unsigned long long h = slotHash(slot, mask);
  for (long long probes = 0; probes <= mask; probes++) {
    const unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(&table[h].key);
    if (seen == mine) break;
    if ((seen >> kSlotBits) != static_cast<unsigned long long>(generation)) {
      // Empty, or left by an earlier call: take it, unless another token takes it first.
      const unsigned long long before = atomicCAS(&table[h].key, seen, mine);
      if (before == seen || before == mine) break;
      probes--;
      continue;  // someone else's slot landed here: look at it again
    }
    h = (h + 1) & static_cast<unsigned long long>(mask);
  }
  atomicMax(&table[h].owner, (static_cast<unsigned long long>(generation) << kSlotBits) | static_cast<unsigned long long>(token));
}

// Whether `token` is the last token of this call naming `slot` (claimSlot ran for every token first).
// Read from L2: the claims come from another grid, possibly one still finishing as this one starts.
__device__ __forceinline__ bool ownsSlot(const SlotOwner* table, long long mask, long long generation, long long slot, long long token) {
  const unsigned long long mine = (static_cast<unsigned long long>(generation) << kSlotBits) | static_cast<unsigned long long>(slot);
  unsigned long long h = slotHash(slot, mask);
  for (long long probes = 0; probes <= mask; probes++) {
    if (__ldcg(&table[h].key) == mine) return (__ldcg(&table[h].owner) & kSlotMask) == static_cast<unsigned long long>(token);
    h = (h + 1) & static_cast<unsigned long long>(mask);
  }
  return false;
}

}  // namespace kvkit
