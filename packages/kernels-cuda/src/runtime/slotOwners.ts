import { LAUNCHES, RECORD_BYTES } from '../generated/kernels.js';
import type { CudaContext } from './context.js';
import type { DeviceBuffer } from './memory.js';
import type { ParamBlock } from './params.js';

const ENTRY_BYTES = RECORD_BYTES.SlotOwner;
const MIN_ENTRIES = 64;

/** What a pool-writing kernel needs to skip all but the last token naming a slot. */
export interface SlotClaims {
  readonly table: number;
  readonly mask: number;
  readonly generation: number;
}

const NONE: SlotClaims = { table: 0, mask: 0, generation: 0 };

/**
 * The device table behind "two tokens on one slot: one of the two rows, never
 * a mix". Before a pool write, claim_slots records the last token naming each
 * slot; the write kernel lets only that token write the row. Entries carry a
 * generation (one per call), so the table is never cleared; it grows by
 * doubling to at least twice the tokens of a call.
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

  /** Enqueues the claim pass for `tokens` slots (i32 or i64) below `slotBelow`; one token needs none. */
  claim(slots: number, slotsAreI64: boolean, tokens: number, slotBelow: number, op: string): SlotClaims {
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
    // Generations wrap after 2^32 calls; 0 stays the "empty" generation.
    this.#generation = this.#generation >= 0xffffffff ? 1 : this.#generation + 1;
    const claims = { table: this.#table!.ptr, mask: this.#entries - 1, generation: this.#generation };
    this.#params
      .set('slots', slots)
      .set('slotOwners', claims.table)
      .set('numTokens', tokens)
      .set('slotsAreI64', slotsAreI64 ? 1 : 0)
      .set('slotBelow', slotBelow)
      .set('slotOwnersMask', claims.mask)
      .set('generation', claims.generation);
    const { threads } = LAUNCHES.claimSlots.default;
    cx.launch('claim_slots', this.#params, Math.ceil(tokens / threads), 1, threads, 0, op);
    return claims;
  }
}
