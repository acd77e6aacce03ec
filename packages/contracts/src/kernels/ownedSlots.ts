/**
 * The fields of every kernel that writes rows at slots after claim_slots settled duplicates (slot_owners.cuh):
 * the owner table, its mask and the call's generation in it.
 */
import { i64, input } from './declare.js';

export const ownedSlotFields = {
  slotOwners: input('SlotOwner', 'winners of duplicate slots, or null (see claim_slots)'),
  slotOwnersMask: i64('slot-owner table capacity - 1'),
  generation: i64("this call's generation in the slot-owner table"),
} as const;
