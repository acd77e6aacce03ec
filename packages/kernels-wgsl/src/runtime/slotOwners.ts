import type { IndexDType } from '@kvkit/contracts';
import type { DuplicateRule } from '@kvkit/contracts/backend';
import { planSlotOwners } from '../shaders/plan.js';
import { slotOwnersShader } from '../shaders/slotOwners.wgsl.js';
import type { BufferRange, DeviceStorage } from './gpuRuntime.js';
import { bytesPerElement } from './gpuTensor.js';
import type { GpuTensor } from './gpuTensor.js';
import type { WebGpuKernels } from './webGpuKernels.js';

/**
 * The owner table of one backend: a u32 per pool slot, 0 between calls (each
 * call's resolve pass clears what its claims set, slotOwners.wgsl.ts), grown
 * by doubling to the largest pool seen. A call costs two dispatches over its
 * tokens and a scratch slot list; no pass over the table. A call of at most a
 * workgroup of tokens costs one dispatch of one workgroup, without the table.
 */
export class SlotOwners {
  readonly #k: WebGpuKernels;
  #table: DeviceStorage | undefined;
  #entries = 0;

  constructor(k: WebGpuKernels) {
    this.#k = k;
  }

  /**
   * Enqueues the ownership pass for `slots` into a pool of `slotBelow` slots;
   * returns the slot list the scatter binds instead, in which every token but
   * the rule's one of each shared slot is skipped. One token contests nothing.
   * A token whose entry of `skipIf` is negative (a copy's source slot) is
   * skipped and claims nothing.
   */
  resolve(slots: GpuTensor, tokens: number, slotBelow: number, rule: DuplicateRule, op: string, skipIf?: GpuTensor): BufferRange {
    if (tokens <= 1 || slotBelow === 0) return slots.range;
    const k = this.#k;
    const slotType = slots.dtype as IndexDType;
    const ownedBytes = tokens * bytesPerElement(slotType);
    const owned = k.scratch('slot owners', ownedBytes).range(0, ownedBytes);
    const params = { tokens, slotBelow };
    const [local, ...staged] = (['local', 'claim', 'resolve'] as const).map((stage) => planSlotOwners(k.runtime.caps, stage, rule, slotType, skipIf?.dtype as IndexDType | undefined));
    // A prepared call builds the kernels of both ways, so a later call of another size finds its own.
    if (k.runtime.dryRun) for (const plan of [local!, ...staged]) k.runtime.kernel(plan, () => slotOwnersShader(plan));
    if (tokens <= local!.workgroupSize) {
      // A decode step's call: one workgroup settles it, and the table is not touched.
      const kernel = k.runtime.kernel(local!, () => slotOwnersShader(local!));
      k.runtime.dispatch(kernel, { slots: slots.range, owned, ...(skipIf ? { skipIf: skipIf.range } : {}) }, params, 1);
      return owned;
    }
    const table = this.#tableFor(slotBelow, op).range(0, slotBelow * 4);
    for (const plan of staged) {
      const kernel = k.runtime.kernel(plan, () => slotOwnersShader(plan));
      const ranges = { slots: slots.range, owners: table, owned, ...(skipIf ? { skipIf: skipIf.range } : {}) };
      k.runtime.dispatch(kernel, ranges, params, Math.ceil(tokens / plan.workgroupSize));
    }
    return owned;
  }

  /** A table of at least `slots` entries; a new one starts zeroed, as WebGPU buffers do. */
  #tableFor(slots: number, op: string): DeviceStorage {
    if (this.#table === undefined || this.#entries < slots) {
      const most = Math.floor(this.#k.runtime.maxBufferBytes / 4);
      const entries = Math.max(slots, Math.min(2 * this.#entries, most));
      this.#table?.release();
      this.#table = this.#k.storage(entries * 4, 'kvkit slot owners', op);
      this.#entries = entries;
    }
    return this.#table;
  }
}
