/**
 * Value rules checked on the device (SEMANTICS.md, "Values that live on the
 * device"). Each op call reserves a flag word of its own and one per rule,
 * and its rules are checked right then, in one dispatch (valueChecks.wgsl.ts),
 * ahead of the call's writing kernels: a bad value raises its rule's word to
 * 0xffffffff − i with atomicMax, so the word ends up naming the first bad
 * index, and the call's word, which the call's kernels read first: then they
 * write nothing. `collect()` (run by sync) reads the words of
 * every call since the last sync, in call order, and turns the first raised
 * one into the ContractError the host check throws (valueRuleError): the index comes
 * from the flag word, the value from the checked tensor at that index (index
 * and parameter tensors are never written by an op, and the call keeps their
 * storage alive until then). A read() settles the words of the calls before
 * it the same way, in its own submit, and keeps what it found for the sync.
 */
import type { IndexDType } from '@kvkit/contracts';
import type { DeviceCheck, DeviceSegmentCheck } from '@kvkit/contracts/backend';
import { offsetsRuleError, segmentsWithinError, valueRuleError } from '@kvkit/contracts/backend';
import type { ContractError } from '@kvkit/contracts';
import { RULES_PER_CHECK } from '@kvkit/contracts/kernels';
import type { CheckValuesParams, CheckValuesRanges } from '../generated/params.js';
import { planCheckValues } from '../shaders/plan.js';
import type { ValueCheckKind } from '../shaders/plan.js';
import { checkValuesShader } from '../shaders/valueChecks.wgsl.js';
import { checkSegmentsShader } from '../shaders/pagedAttention.wgsl.js';
import { planCheckSegments } from '../shaders/pagedPlan.js';
import type { BufferRange, DeviceStorage, GpuRuntime, RecordedRead } from './gpuRuntime.js';
import type { GpuTensor } from './gpuTensor.js';

const WORDS_PER_BUFFER = 4096;

/** The flag buffer of a call and its word there, which its check raises when any rule breaks (the kernels' gate). */
export interface CallFlags {
  readonly flags: BufferRange;
  readonly call: number;
}

interface Pending {
  readonly buffer: number;
  readonly word: number;
  readonly check: DeviceCheck;
  readonly dims: Readonly<Record<string, number>>;
  readonly values: DeviceStorage;
  readonly valuesOffset: number;
  readonly dtype: IndexDType | 'f32';
  /** An offsets rule (indptr) in place of a value rule: decoded from the entries around the flagged one. */
  readonly segment?: { readonly check: DeviceSegmentCheck; readonly within?: DeviceStorage; readonly withinOffset: number };
}

/**
 * The offsets rules of a call (pagedAttention's indptr), checked in one
 * dispatch of their own; their words come after the first `after` value
 * rules, in the contract's step order, so the first break found is the one
 * the host check would throw.
 */
export interface SegmentChecks {
  readonly checks: readonly DeviceSegmentCheck[];
  readonly after: number;
  /** B + 1, N and C. */
  readonly entries: number;
  readonly qTotal: number;
  readonly kvTotal: number;
}

/**
 * What the check shader tests for a rule, of the shapes the contracts declare: indices in [0, below), negatives
 * skipping or not; floats finite and >= 0 (eps) or finite and > 0 (an fp8 scale). Undefined for any other.
 */
function valueCheckKind(rule: DeviceCheck): ValueCheckKind | undefined {
  const dtype = rule.tensor.dtype;
  if (dtype === 'f32') {
    if (!rule.finite || rule.below !== undefined) return undefined;
    if (rule.min === 0 && rule.above === undefined) return 'f32 >= 0';
    if (rule.above === 0 && rule.min === undefined) return 'f32 > 0';
    return undefined;
  }
  const index = !rule.finite && rule.above === undefined && (rule.negativeSkips || rule.min === 0) && rule.below !== undefined;
  return index ? (dtype as IndexDType) : undefined;
}

export class DeviceChecks {
  readonly #runtime: GpuRuntime;
  readonly #buffers: { buffer: GPUBuffer; id: number }[] = [];
  /** Words handed out since the last collect; a call's words all sit in one buffer. */
  #used = 0;
  #pending: Pending[] = [];
  /** Flags a read() settled, in call order, while they run or if they found something: their first violation is the next sync's. */
  readonly #settled: Promise<ContractError | undefined>[] = [];

  constructor(runtime: GpuRuntime) {
    this.#runtime = runtime;
  }

  /**
   * Flag words for one call: the call's own, then one per rule; and the one
   * dispatch that checks the rules. Call it before the call's first writing
   * dispatch, which takes `call` as its callFlag.
   */
  reserve(rules: readonly DeviceCheck[], dims: Readonly<Record<string, number>>, segments?: SegmentChecks): CallFlags {
    if (this.#runtime.dryRun) {
      const planned = this.#planReserve(rules);
      if (segments) this.#checkSegments(segments, [1, 2, 3], planned);
      return planned;
    }
    const segmentCount = segments?.checks.length ?? 0;
    let buffer = Math.floor(this.#used / WORDS_PER_BUFFER);
    if ((this.#used % WORDS_PER_BUFFER) + 1 + rules.length + segmentCount > WORDS_PER_BUFFER) {
      buffer += 1;
      this.#used = buffer * WORDS_PER_BUFFER;
    }
    while (this.#buffers.length <= buffer) this.#buffers.push(this.#runtime.createBuffer(WORDS_PER_BUFFER * 4, 'kvkit value-check flags'));
    const call = this.#used % WORDS_PER_BUFFER;
    this.#used += 1;
    const segmentWords: number[] = [];
    const takeSegments = () => {
      for (const check of segments?.checks ?? []) {
        const word = this.#used % WORDS_PER_BUFFER;
        this.#used += 1;
        segmentWords.push(word);
        const t = check.tensor as GpuTensor;
        const w = check.kind === 'segmentsWithin' ? (check.withinTensor as GpuTensor) : undefined;
        this.#pending.push({
          buffer,
          word,
          check: undefined as unknown as DeviceCheck,
          dims: { ...dims },
          values: t.storage.retain(),
          valuesOffset: t.byteOffset,
          dtype: t.dtype as IndexDType,
          segment: { check, ...(w ? { within: w.storage.retain() } : {}), withinOffset: w?.byteOffset ?? 0 },
        });
      }
    };
    if (segments && segments.after === 0) takeSegments();
    const checked = rules.map((rule, i) => {
      const word = this.#used % WORDS_PER_BUFFER;
      this.#used += 1;
      const t = rule.tensor as GpuTensor;
      this.#pending.push({
        buffer,
        word,
        check: rule,
        dims: { ...dims },
        values: t.storage.retain(),
        valuesOffset: t.byteOffset,
        dtype: t.dtype as IndexDType | 'f32',
      });
      if (segments && segments.after === i + 1) takeSegments();
      return { rule, word };
    });
    if (segments && segments.after > rules.length) takeSegments();
    const { buffer: gpu, id } = this.#buffers[buffer]!;
    const flags = { buffer: gpu, id, offset: 0, size: WORDS_PER_BUFFER * 4 };
    this.#check(checked, flags, call);
    if (segments) this.#checkSegments(segments, segmentWords, { flags, call });
    return { flags, call };
  }

  /** A dry run's reserve: the flag buffer made and the check kernel planned (or rehearsed), no word taken and nothing left pending. */
  #planReserve(rules: readonly DeviceCheck[]): CallFlags {
    if (this.#buffers.length === 0) this.#buffers.push(this.#runtime.createBuffer(WORDS_PER_BUFFER * 4, 'kvkit value-check flags'));
    const { buffer, id } = this.#buffers[0]!;
    const flags = { buffer, id, offset: 0, size: WORDS_PER_BUFFER * 4 };
    this.#check(rules.map((rule, i) => ({ rule, word: i + 1 })), flags, 0);
    return { flags, call: 0 };
  }

  /** One dispatch that checks the call's rules, each into its flag word and the call's. */
  #check(rules: readonly { readonly rule: DeviceCheck; readonly word: number }[], flags: BufferRange, call: number): void {
    const present = rules.filter(({ rule }) => rule.tensor.shape.reduce((n, d) => n * d, 1) > 0);
    if (present.length === 0) return;
    if (present.length > RULES_PER_CHECK) {
      // More rules than one dispatch takes (copySlots' four scales and two slot lists): one dispatch per group.
      for (let i = 0; i < present.length; i += RULES_PER_CHECK) this.#check(present.slice(i, i + RULES_PER_CHECK), flags, call);
      return;
    }
    const params: Record<string, number> = { longest: 0, callFlag: call };
    const ranges: Record<string, BufferRange> = { flags };
    for (let r = 0; r < RULES_PER_CHECK; r++) {
      const at = present[r];
      const t = at?.rule.tensor as GpuTensor | undefined;
      const count = t ? t.numel : 0;
      params.longest = Math.max(params.longest, count);
      Object.assign(params, { [`count${r}`]: count, [`offset${r}`]: 0, [`flag${r}`]: at?.word ?? 0, [`below${r}`]: 0, [`negativeSkips${r}`]: 0 });
      if (!at || !t) continue;
      const { rule } = at;
      if (valueCheckKind(rule) === undefined) throw new Error(`${rule.op}: the device check of ${rule.arg} takes no rule of this shape`);
      // Bound from the storage offset alignment below the tensor (a materializer's eps sits after its weights).
      const start = t.byteOffset - (t.byteOffset % this.#runtime.device.limits.minStorageBufferOffsetAlignment);
      ranges[`values${r}`] = t.storage.range(start, t.byteOffset - start + t.byteLength);
      Object.assign(params, { [`offset${r}`]: (t.byteOffset - start) / 4, [`below${r}`]: Math.min(rule.below ?? 0, 0xffffffff), [`negativeSkips${r}`]: rule.negativeSkips ? 1 : 0 });
    }
    const plan = planCheckValues(this.#runtime.caps, present.map(({ rule }) => valueCheckKind(rule)!));
    const kernel = this.#runtime.kernel(plan, () => checkValuesShader(plan));
    this.#runtime.dispatch(kernel, ranges as unknown as CheckValuesRanges, params as unknown as CheckValuesParams, Math.ceil(params.longest! / plan.workgroupSize));
  }

  /** One dispatch over the B + 1 entries of the call's indptr tensors (checkSegments.wgsl in pagedAttention.wgsl.ts). */
  #checkSegments(segments: SegmentChecks, words: readonly number[], { flags, call }: CallFlags): void {
    const of = (kind: 'offsets' | 'segmentsWithin', arg?: string) => segments.checks.findIndex((c) => c.kind === kind && (arg === undefined || c.arg === arg));
    const q = of('offsets', 'qIndptr');
    const kv = of('offsets', 'kvIndptr');
    const within = of('segmentsWithin');
    const tensorOf = (i: number, other: 'tensor' | 'withinTensor') => {
      const c = segments.checks[i] as (DeviceSegmentCheck & { withinTensor?: unknown }) | undefined;
      return c?.[other] as GpuTensor | undefined;
    };
    const qT = tensorOf(q, 'tensor') ?? tensorOf(within, 'tensor');
    const kvT = tensorOf(kv, 'tensor') ?? tensorOf(within, 'withinTensor');
    if (!qT || !kvT || segments.entries === 0) return;
    const plan = planCheckSegments(this.#runtime.caps, qT.dtype as IndexDType, kvT.dtype as IndexDType);
    const kernel = this.#runtime.kernel(plan, () => checkSegmentsShader(plan));
    // A rule the host checked already holds, so its test cannot fire: it is pointed at the call's own word.
    const word = (i: number) => (i >= 0 ? words[i]! : call);
    this.#runtime.dispatch(
      kernel,
      { qIndptr: qT.range, kvIndptr: kvT.range, flags },
      { entries: segments.entries, qTotal: segments.qTotal, kvTotal: segments.kvTotal, qFlag: word(q), kvFlag: word(kv), withinFlag: word(within), callFlag: call },
      Math.ceil(segments.entries / plan.workgroupSize),
    );
  }

  /** The first violation recorded since the last collect, as its ContractError; clears every flag. */
  async collect(op: string): Promise<ContractError | undefined> {
    const settle = this.#record();
    this.#runtime.flush();
    // Words a read() settled come from earlier calls than those just recorded; all are awaited, so every storage is released.
    const outcomes = await Promise.allSettled([...this.#settled.splice(0), ...(settle ? [settle(op)] : [])]);
    for (const o of outcomes) {
      if (o.status === 'rejected') throw o.reason;
      if (o.value) return o.value;
    }
    return undefined;
  }

  /**
   * For `read()`: records the copy of every pending flag into the batch the
   * read is about to submit, and once that submit is done settles them,
   * releasing the checked tensors' storage; the first violation waits for
   * the next sync. So a loop that reads but never syncs keeps no check
   * buffers. Call `settleAfterFlush` right after the flush.
   */
  recordForRead(): { settleAfterFlush(op: string): void } | undefined {
    const settle = this.#record();
    if (!settle) return undefined;
    return {
      settleAfterFlush: (op) => {
        const found = settle(op);
        this.#settled.push(found);
        // One that found nothing is dropped, so reads without a sync keep nothing; a failure (a lost device) waits for the sync.
        found.then(
          (violation) => {
            const at = this.#settled.indexOf(found);
            if (violation === undefined && at >= 0) this.#settled.splice(at, 1);
          },
          () => {},
        );
      },
    };
  }

  /**
   * Records the copy-out and the clear of every flag word used since the last
   * collect into the current batch, and hands the pending calls to the
   * returned function, which (once that batch is submitted) maps the copies
   * and finds the first violation. Undefined when nothing is pending.
   */
  #record(): ((op: string) => Promise<ContractError | undefined>) | undefined {
    const pending = this.#pending;
    if (pending.length === 0) return undefined;
    this.#pending = [];
    const used = this.#used;
    this.#used = 0;
    const runtime = this.#runtime;
    // The flag words are copied out and cleared in one submit, ahead of any later call's use of them.
    const reads: RecordedRead[] = [];
    try {
      const buffersUsed = Math.ceil(used / WORDS_PER_BUFFER);
      for (let b = 0; b < buffersUsed; b++) {
        const words = Math.min(WORDS_PER_BUFFER, used - b * WORDS_PER_BUFFER);
        const buffer = this.#buffers[b]!.buffer;
        reads.push(runtime.recordRead(buffer, 0, words * 4));
        runtime.clear(buffer, 0, WORDS_PER_BUFFER * 4);
      }
    } catch (e) {
      for (const p of pending) p.values.release();
      throw e;
    }
    return async (op) => {
      try {
        const flags = (await Promise.all(reads.map((r) => runtime.finishRead(op, r)))).map((bytes) => new Uint32Array(bytes));
        for (const p of pending) {
          const key = flags[p.buffer]![p.word]!;
          if (key === 0) continue;
          const index = 0xffffffff - key;
          if (p.segment) return await segmentError(runtime, op, p, index);
          const size = p.dtype === 'i64' ? 8 : 4;
          const raw = await runtime.readBytes(op, p.values.buffer, p.valuesOffset + index * size, size);
          const actual = p.dtype === 'i64' ? new BigInt64Array(raw)[0]! : p.dtype === 'f32' ? new Float32Array(raw)[0]! : new Int32Array(raw)[0]!;
          return valueRuleError(p.check, index, actual, p.dims);
        }
        return undefined;
      } finally {
        for (const p of pending) {
          p.values.release();
          p.segment?.within?.release();
        }
      }
    };
  }

  destroy(): void {
    this.#settled.splice(0);
    for (const p of this.#pending.splice(0)) {
      p.values.release();
      p.segment?.within?.release();
    }
    for (const b of this.#buffers.splice(0)) b.buffer.destroy();
  }
}

/** The error of an offsets rule found broken at entry `index` on the device: the entries there tell which way (start, going down, or the wrong end). */
async function segmentError(runtime: GpuRuntime, op: string, p: Pending, index: number): Promise<ContractError> {
  const size = p.dtype === 'i64' ? 8 : 4;
  const entry = async (storage: DeviceStorage, offset: number, i: number): Promise<number | bigint> => {
    const raw = await runtime.readBytes(op, storage.buffer, offset + i * size, size);
    return p.dtype === 'i64' ? new BigInt64Array(raw)[0]! : new Int32Array(raw)[0]!;
  };
  const check = p.segment!.check;
  if (check.kind === 'offsets') {
    const value = await entry(p.values, p.valuesOffset, index);
    const how = index === 0 ? 'start' : Number(value) < Number(await entry(p.values, p.valuesOffset, index - 1)) ? 'decreasing' : 'end';
    return offsetsRuleError(check, index, value, how, p.dims);
  }
  const within = p.segment!.within!;
  const withinSize = (check.withinTensor as GpuTensor).dtype === 'i64' ? 8 : 4;
  const withinEntry = async (i: number): Promise<number> => {
    const raw = await runtime.readBytes(op, within.buffer, p.segment!.withinOffset + i * withinSize, withinSize);
    return Number(withinSize === 8 ? new BigInt64Array(raw)[0]! : new Int32Array(raw)[0]!);
  };
  const length = Number(await entry(p.values, p.valuesOffset, index + 1)) - Number(await entry(p.values, p.valuesOffset, index));
  const limit = (await withinEntry(index + 1)) - (await withinEntry(index));
  return segmentsWithinError(check, index, length, limit, p.dims);
}
