import type { DuplicateRule } from '@kvkit/contracts/backend';
import { LAUNCHES, RECORD_BYTES } from '../generated/kernels.js';
import type { CudaContext } from './context.js';
import type { KernelName } from './kernelNames.js';
import type { DeviceBuffer } from './memory.js';
import type { ParamBlock } from './params.js';

const ENTRY_BYTES = RECORD_BYTES.SlotOwner;
const MIN_ENTRIES = 64;
/** Generations live above 40 bits of slot in a key (slot_owners.cuh); 0 marks an empty entry. */
const LAST_GENERATION = 2 ** 24 - 1;
/** The claim kernel for each of the contract's duplicate rules. */
const CLAIM_KERNEL = { last: 'claim_slots' } as const satisfies Readonly<Record<DuplicateRule, KernelName>>;

/** What a pool-writing kernel needs to skip all but the last token naming a slot. */
export interface SlotClaims {
  readonly table: number;
  readonly mask: number;
  readonly generation: number;
}

const NONE: SlotClaims = { table: 0, mask: 0, generation: 0 };

/** A kernel's slot-owner fields (slot_owners.cuh) for these claims; none: the kernel writes every slot it is given. */
export function ownerParams(claims: SlotClaims = NONE): { slotOwners: number; slotOwnersMask: number; generation: number } {
  return { slotOwners: claims.table, slotOwnersMask: claims.mask, generation: claims.generation };
}

/**
 * The device table behind the contract's duplicate-slot rule ('last': of the
 * tokens naming one slot, the last writes it). Before a pool write, claim_slots records the last token naming each
 * slot; the write kernel lets only that token write the row. Entries carry a
 * generation (one per call), so the table is cleared only when the 24-bit
 * generation wraps (every 16M calls); it grows by doubling to at least twice
 * the tokens of a call.
 */
export class SlotOwners {
  readonly #cx: CudaContext;
  readonly #params: ParamBlock<'ClaimSlotsParams'>;
  #table: DeviceBuffer | undefined;
  #entries = 0;
  #generation = 0;

  constructor(cx: CudaContext, params: ParamBlock<'ClaimSlotsParams'>) {
    this.#cx = cx;
    this.#params = params;
  }

  /**
   * Enqueues the claim pass for `tokens` slots (i32 or i64) below `slotBelow` under the contract's rule; one token needs none.
   * `besideCheck`: the call's value check was launched just before, and the pass may run beside it (it writes
   * nothing the check reads, and ends after it).
   */
  claim(slots: number, slotsAreI64: boolean, tokens: number, slotBelow: number, rule: DuplicateRule, op: string, besideCheck = false): SlotClaims {
    if (tokens <= 1) return NONE;
    const claims = this.reserve(tokens, op);
    this.#params.write({
      slots,
      ...ownerParams(claims),
      numTokens: tokens,
      slotsAreI64: slotsAreI64 ? 1 : 0,
      slotBelow,
    });
    const { threads } = LAUNCHES.claimSlots.default;
    if (besideCheck) this.#cx.launchOverlapping(CLAIM_KERNEL[rule], this.#params, Math.ceil(tokens / threads), threads, 0, op);
    else this.#cx.launch(CLAIM_KERNEL[rule], this.#params, Math.ceil(tokens / threads), 1, threads, 0, op);
    return claims;
  }

  /**
   * A fresh generation of the table, sized for `tokens` claims, for an op whose own kernel makes them
   * (copySlots claims only the pairs it does not skip); NONE for one token or none.
   */
  reserve(tokens: number, op: string): SlotClaims {
    if (tokens <= 1) return NONE;
    const cx = this.#cx;
    if (this.#entries < 2 * tokens) {
      let entries = Math.max(MIN_ENTRIES, 2 * this.#entries);
      while (entries < 2 * tokens) entries *= 2;
      this.#table?.release();
      this.#table = cx.alloc(entries * ENTRY_BYTES, op);
      cx.fill(this.#table.ptr, 0, entries * ENTRY_BYTES, op); // generation 0: empty
      this.#entries = entries;
    }
    if (this.#generation >= LAST_GENERATION) {
      // Entries of a generation about to be reused would look current: start from an empty table.
      cx.fill(this.#table!.ptr, 0, this.#entries * ENTRY_BYTES, op);
      this.#generation = 0;
    }
    this.#generation += 1;
    return { table: this.#table!.ptr, mask: this.#entries - 1, generation: this.#generation };
  }
}
