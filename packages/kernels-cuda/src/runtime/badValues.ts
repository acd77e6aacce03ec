import type { DeviceCheck, DeviceSegmentCheck, OffsetsBreak } from '@kvkit/contracts/backend';
import { offsetsRuleError, segmentsWithinError, valueRuleError } from '@kvkit/contracts/backend';
import type { ContractError } from '@kvkit/contracts';
import { RULES_PER_CHECK, VALUE_KIND } from '@kvkit/contracts/kernels';
import { LAUNCHES, RECORD_BYTES } from '../generated/kernels.js';
import type { CudaContext } from './context.js';
import type { DeviceBuffer, PinnedBlock } from './memory.js';
import type { ParamBlock, ParamFields } from './params.js';

/** Checks numbered between two syncs before the list is drained on the spot, so a program that never syncs stays bounded. */
const MAX_PENDING = 1 << 16;

/** BadValueRecord: key (u64), value (i64), lock, rejectedCall (contracts' deviceRecords). */
const BAD_VALUE_BYTES = RECORD_BYTES.BadValueRecord;

/** A numbered check: a value rule (check_values.cu) or an offsets rule (check_segments.cu). */
export type NumberedCheck = DeviceCheck | DeviceSegmentCheck;

/** How check_segments.cu records the way an offsets rule broke, in the low two bits of the value. */
const OFFSETS_BREAKS: readonly OffsetsBreak[] = ['start', 'decreasing', 'end'];

/** A copy of the record taken before a sync (by a read() or a drain), with the checks it numbers; kept while it may hold a violation. */
export interface Settlement {
  readonly checks: readonly NumberedCheck[];
  readonly dims: readonly Readonly<Record<string, number>>[];
  /** Where the copy lands; undefined once decoded. */
  mirror: PinnedBlock | undefined;
  found: ContractError | undefined;
}

/** A rule of the call being enqueued, numbered, with the contiguous device copy of its values. */
interface CallRule {
  readonly check: number;
  readonly rule: DeviceCheck;
  readonly values: number;
}

/** The rules' fields of a parameter block (CheckValuesParams, and the kernels that test their own: valueRuleParams). */
export type ValueRuleFields = Readonly<Omit<ParamFields['CheckValuesParams'], 'badValue' | 'call'>>;

function valueCount(r: CallRule): number {
  return r.rule.tensor.shape.reduce((n, d) => n * d, 1);
}

/** Up to RULES_PER_CHECK rules as fields; a rule not there has null values. */
function ruleFields(rules: readonly CallRule[]): ValueRuleFields {
  const fields: Record<string, number> = {};
  for (let r = 0; r < RULES_PER_CHECK; r++) {
    const at = rules[r];
    fields[`values${r}`] = at ? at.values : 0;
    fields[`count${r}`] = at ? valueCount(at) : 0;
    fields[`kind${r}`] = at ? VALUE_KIND[at.rule.tensor.dtype as keyof typeof VALUE_KIND] : 0;
    fields[`min${r}`] = at?.rule.min ?? -Infinity;
    fields[`above${r}`] = at?.rule.above ?? -Infinity;
    fields[`below${r}`] = at?.rule.below ?? Infinity;
    fields[`negativeSkips${r}`] = at?.rule.negativeSkips ? 1 : 0;
    fields[`finite${r}`] = at?.rule.finite ? 1 : 0;
    fields[`check${r}`] = at ? at.check : 0xffffffff;
  }
  return fields as unknown as ValueRuleFields;
}

/** The fields of a kernel whose call check_values tested (or that has no rules): no rule for the kernel to test. */
export const NO_RULES = ruleFields([]);

/**
 * The value rules the contracts hand to the device (positions inside the
 * cache, slots inside the pool, eps finite and >= 0, fp8 scales finite and > 0). Each enqueued check gets
 * a number; one launch per call (check_values.cu) tests the call's rules before
 * any of its kernels writes, keeps the smallest (check, token) that broke its
 * rule, with its value, in one small device record, and marks the call
 * rejected there, so its kernels write nothing. sync() reads and clears the
 * record and throws the ContractError the host check throws (valueRuleError).
 * A read() copies and clears it too, on its own event, so a loop that reads
 * and never syncs keeps no checks (nor the tensors they name); what it finds
 * waits for the sync.
 */
export class BadValues {
  readonly #cx: CudaContext;
  readonly record: DeviceBuffer;
  #checks: NumberedCheck[] = [];
  #dims: Readonly<Record<string, number>>[] = [];
  /** Copies taken since the last sync, in enqueue order: the first violation among them is the next sync's. */
  #settlements: Settlement[] = [];
  readonly #params: ParamBlock<'CheckValuesParams'>;
  /** Rules numbered since the last checkCall: the call being enqueued. */
  #callRules: CallRule[] = [];
  /** Checks of either kind numbered since the last checkCall. */
  #callChecks = 0;
  /** The last call number handed out; BadValueRecord.rejectedCall holds one of them (0 never: no check). */
  #calls = 0;

  constructor(cx: CudaContext, params: ParamBlock<'CheckValuesParams'>) {
    this.#cx = cx;
    this.#params = params;
    this.record = cx.alloc(BAD_VALUE_BYTES, 'createCudaBackend');
    cx.fill(this.record.ptr, 0xff, 8, 'createCudaBackend');
    cx.fill(this.record.ptr + 8, 0, BAD_VALUE_BYTES - 8, 'createCudaBackend');
  }

  /** Numbers one rule of a call about to be launched, whose values the device holds contiguous at `values`. */
  enqueue(check: DeviceCheck, dims: Readonly<Record<string, number>>, values: number): number {
    const number = this.#number(check, dims);
    this.#callRules.push({ check: number, rule: check, values });
    return number;
  }

  /**
   * Numbers one offsets rule of the call about to be launched, in the contract's order among its value rules;
   * the op launches check_segments.cu with the number, after checkCall.
   */
  enqueueSegment(check: DeviceSegmentCheck, dims: Readonly<Record<string, number>>): number {
    return this.#number(check, dims);
  }

  #number(check: NumberedCheck, dims: Readonly<Record<string, number>>): number {
    // Drained between calls only, so the numbers of one call's rules stay together.
    if (this.#callChecks === 0 && this.#checks.length >= MAX_PENDING) this.#drainNow(check.op);
    this.#checks.push(check);
    this.#dims.push(dims);
    this.#callChecks += 1;
    return this.#checks.length - 1;
  }

  /**
   * Launches the check of the rules numbered since the last call of this,
   * ahead of the call's kernels that write, and returns the call's number for
   * their gate (callRejected in bad_values.cuh); 0 when the call has no rule
   * on the device, and nothing is launched. On `stream` (another than the
   * context's), a plain launch behind what that stream holds. More rules than
   * one launch takes go in several, one after the other; a call with offsets
   * rules only gets its number and no launch (its op launches check_segments).
   */
  checkCall(op: string, stream?: bigint): number {
    const rules = this.#callRules.splice(0);
    const numbered = this.#callChecks;
    this.#callChecks = 0;
    if (numbered === 0) return 0;
    this.#calls = this.#calls >= 0x7fffffff ? 1 : this.#calls + 1;
    for (let first = 0; first < rules.length; first += RULES_PER_CHECK) this.#launchCheck(rules.slice(first, first + RULES_PER_CHECK), op, stream);
    return this.#calls;
  }

  /**
   * For a call whose one kernel tests its own rules (value_rules.cuh blockFindsBadValue: every block over all the
   * values): the call's number and the rules' fields of that kernel's parameters, and nothing launched. Undefined
   * (nothing taken: checkCall follows) where the call has offsets rules, more rules than the fields hold, or a
   * rule of more than `mostValues` values, which each block would test at too high a cost.
   */
  checkInKernel(mostValues: number): { readonly call: number; readonly rules: ValueRuleFields } | undefined {
    const rules = this.#callRules;
    if (rules.length !== this.#callChecks || rules.length > RULES_PER_CHECK || rules.some((r) => valueCount(r) > mostValues)) return undefined;
    this.#callRules = [];
    this.#callChecks = 0;
    if (rules.length === 0) return { call: 0, rules: NO_RULES };
    this.#calls = this.#calls >= 0x7fffffff ? 1 : this.#calls + 1;
    return { call: this.#calls, rules: ruleFields(rules) };
  }

  /** One check_values launch for up to RULES_PER_CHECK rules of the call numbered last. */
  #launchCheck(rules: readonly CallRule[], op: string, stream: bigint | undefined): void {
    const longest = Math.max(0, ...rules.map(valueCount));
    this.#params.write({ ...ruleFields(rules), badValue: this.record.ptr, call: this.#calls });
    const { threads } = LAUNCHES.checkValues.default;
    const grid = Math.max(1, Math.min(Math.ceil(longest / threads), this.#cx.multiprocessors * 4));
    // It waits for the grid ahead before reading, and lets the call's first kernel launch behind it.
    if (stream === undefined) this.#cx.launchOverlapping('check_values', this.#params, grid, threads, 0, op);
    else this.#cx.launch('check_values', this.#params, grid, 1, threads, 0, op, 1, stream);
  }

  /** At sync: waits for the work enqueued so far and returns the first bad value it met, if any. */
  async collect(op: string): Promise<ContractError | undefined> {
    const checks = this.#checks;
    const dims = this.#dims;
    this.#checks = [];
    this.#dims = [];
    const earlier = this.#settlements.splice(0);
    const mirror = this.#cx.pinned(BAD_VALUE_BYTES, op);
    try {
      this.#readAndClear(mirror.ptr, op);
      const event = this.#cx.record(op);
      await this.#cx.wait(event, op);
      this.#cx.recycle(event);
      // One stream: every earlier copy has landed before this one.
      for (const s of earlier) this.#decodeSettlement(s);
      return earlier.find((s) => s.found)?.found ?? this.#decode(mirror.view, checks, dims);
    } finally {
      this.#cx.givePinned(mirror);
      for (const s of earlier) this.#giveBack(s);
    }
  }

  /**
   * For read(): enqueues the copy and the clear of the record now, before the
   * read's own copy; call `afterRead` once the read's event has landed.
   * Undefined when no check is pending.
   */
  recordForRead(op: string): Settlement | undefined {
    if (this.#checks.length === 0) return undefined;
    const s: Settlement = { checks: this.#checks, dims: this.#dims, mirror: this.#cx.pinned(BAD_VALUE_BYTES, op), found: undefined };
    this.#checks = [];
    this.#dims = [];
    this.#settlements.push(s);
    this.#readAndClear(s.mirror!.ptr, op);
    return s;
  }

  /** Decodes a read's copy; one that found nothing is dropped, so reads without a sync keep nothing. */
  afterRead(s: Settlement): void {
    this.#decodeSettlement(s);
    this.#giveBack(s);
    if (s.found === undefined) {
      const at = this.#settlements.indexOf(s);
      if (at >= 0) this.#settlements.splice(at, 1);
    }
  }

  #decodeSettlement(s: Settlement): void {
    if (s.mirror) s.found ??= this.#decode(s.mirror.view, s.checks, s.dims);
  }

  #giveBack(s: Settlement): void {
    if (s.mirror) this.#cx.givePinned(s.mirror);
    s.mirror = undefined;
  }

  #readAndClear(mirror: bigint, op: string): void {
    this.#cx.makeCurrent();
    this.#cx.download(mirror, this.record.ptr, BAD_VALUE_BYTES, op);
    this.#cx.fill(this.record.ptr, 0xff, 8, op);
  }

  #drainNow(op: string): void {
    const mirror = this.#cx.pinned(BAD_VALUE_BYTES, op);
    try {
      this.#readAndClear(mirror.ptr, op);
      this.#cx.synchronize(op);
      const found = this.#decode(mirror.view, this.#checks, this.#dims);
      if (found) this.#settlements.push({ checks: [], dims: [], mirror: undefined, found });
    } finally {
      this.#cx.givePinned(mirror);
    }
    this.#checks = [];
    this.#dims = [];
  }

  #decode(view: ArrayBuffer, checks: readonly NumberedCheck[], dims: readonly Readonly<Record<string, number>>[]): ContractError | undefined {
    const words = new Uint32Array(view, 0, 4);
    if (words[0] === 0xffffffff && words[1] === 0xffffffff) return undefined;
    const check = checks[words[1]!];
    if (!check) return undefined;
    const token = words[0]!;
    const bytes = new DataView(view);
    if ('kind' in check) return segmentError(check, token, bytes.getBigInt64(8, true), dims[words[1]!]!);
    // The same value types the host check reports: a bigint for i64 tensors, a number for i32; an f32 parameter's bits.
    const dtype = check.tensor.dtype;
    const actual = dtype === 'f32' ? bytes.getFloat32(8, true) : dtype === 'i64' ? bytes.getBigInt64(8, true) : Number(bytes.getBigInt64(8, true));
    return valueRuleError(check, token, actual, dims[words[1]!]!);
  }
}

/**
 * The error of an offsets rule check_segments.cu recorded at `entry`: for an offsets rule the entry's value
 * times 4 plus the way it broke (a bigint for i64 offsets, as the host check reports it); for segmentsWithin
 * qLen · 2^32 + kvLen of request `entry`.
 */
function segmentError(check: DeviceSegmentCheck, entry: number, raw: bigint, dims: Readonly<Record<string, number>>): ContractError {
  if (check.kind === 'segmentsWithin') return segmentsWithinError(check, entry, Number(raw >> 32n), Number(raw & 0xffffffffn), dims);
  const how = Number(raw & 3n);
  const value = (raw - BigInt(how)) / 4n;
  return offsetsRuleError(check, entry, check.tensor.dtype === 'i64' ? value : Number(value), OFFSETS_BREAKS[how]!, dims);
}
