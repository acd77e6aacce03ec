import { breaksValueRule, valueBounds, valueRuleError } from '../backend/valueRules.js';
import type { ValueBounds } from '../backend/valueRules.js';
import { firstLongerSegment, firstOffsetsBreak, offsetsRuleError, segmentsWithinError } from '../backend/segmentRules.js';
import type { OffsetsBounds, SegmentsWithinBounds } from '../backend/segmentRules.js';
import type { ChoiceShape, DimExpr, DTypeRule, DuplicateRule, TaggedArg, TaggedField } from '../dsl/declare.js';
import { evalDim, isDimName } from '../dsl/dims.js';
import { isContiguous, layoutOf, storageOverlaps } from '../backend/viewLayout.js';
import { ContractError } from '../errors/contractError.js';
import { isTensor, LAYER_VIEW, numel, TENSOR_OWNER } from '../tensor.js';
import type { DType, OwnedTensor, Shape } from '../tensor.js';
import type { TensorLimit } from './tensors.js';

/** Who runs a call: validators compare tensors against it and ask it for host-side values. */
export interface ValidationContext {
  /** The backend instance; every tensor of the call must be its own. */
  readonly owner: object;
  /** How the backend names itself in messages, e.g. `cpu backend #1`. */
  readonly label: string;
  /** Values of a tensor where they live on the host (floats as numbers); undefined defers the rule to the device. */
  hostValues?(t: OwnedTensor): ArrayLike<number | bigint> | undefined;
  /** The largest tensor of a dtype the backend holds (KV045); 32-bit element indexing where absent. */
  tensorLimit?(dtype: DType): TensorLimit;
  /** True once the backend's `dispose()` ran: every call is then refused with KV003 before its arguments are read. */
  isDisposed?(): boolean;
}

/** KV003 for any call on a disposed backend, the same on every backend. */
export function backendDisposed(op: string): ContractError {
  return new ContractError('KV003', op, { arg: 'this backend' });
}

/** Dims and dtypes bound by an earlier call that this one continues (the materializer's constructor). */
export interface Inherited {
  readonly dims: Readonly<Record<string, number>>;
  readonly dtypes: Readonly<Record<string, DType>>;
}

/**
 * An offsets rule left to the device: `tensor` starts at 0, never decreases
 * and ends at `total`; or (segmentsWithin) each of its segments is no longer
 * than the same segment of `withinTensor`. The device checks these before the
 * call's kernels read the tensors, and reports the first break through
 * `offsetsRuleError` / `segmentsWithinError`.
 */
export type DeviceSegmentCheck = (OffsetsBounds & { readonly tensor: OwnedTensor }) | (SegmentsWithinBounds & { readonly tensor: OwnedTensor; readonly withinTensor: OwnedTensor });

/** A value rule left to the device: its bounds resolved, its code and op ready for the error. */
export interface DeviceCheck extends ValueBounds {
  readonly tensor: OwnedTensor;
}

export interface ValueRuleSpec {
  readonly min?: number;
  /** Exclusive lower bound: a value must be greater. */
  readonly above?: number;
  readonly below?: DimExpr;
  readonly finite?: boolean;
  readonly negativeSkips?: boolean;
  readonly ceiling?: { readonly below: number; readonly code: string };
  readonly duplicates?: DuplicateRule;
}

/** A tagged parameter's rule as the validator receives it: the declaration without its name and prose. */
export type TaggedRule = Omit<TaggedArg, 'kind' | 'name' | 'typeName' | 'doc' | 'variants'> & {
  readonly variants: Readonly<Record<string, { readonly fields: Readonly<Record<string, Omit<TaggedField, 'doc'>>> }>>;
};
/** The streams rule of a tensor (mRoPE positions) as a validator applies it: `given` says whether its parameter is. */
export interface StreamsCheck {
  readonly count: number;
  readonly given: boolean;
  readonly code: string;
  readonly unexpectedCode: string;
}

/** One validation in progress: binds dims as arguments are read and throws the first violation. */
export class Call {
  readonly dims: Record<string, number>;
  readonly dtypes: Record<string, DType>;
  readonly deviceChecks: DeviceCheck[] = [];
  readonly deviceSegmentChecks: DeviceSegmentCheck[] = [];
  /** Per destination index tensor, how tokens naming one value resolve: the backends read it here. */
  readonly duplicates: Record<string, DuplicateRule> = {};

  constructor(
    readonly op: string,
    readonly ctx: ValidationContext,
    inherited?: Inherited,
  ) {
    if (ctx.isDisposed?.()) throw backendDisposed(op);
    this.dims = { ...inherited?.dims };
    this.dtypes = { ...inherited?.dtypes };
  }

  fail(code: string, details: Record<string, unknown>): never {
    throw new ContractError(code, this.op, details, { ...this.dims });
  }

  /**
   * The arguments object; an unknown key is reported before anything else so a misspelt optional argument is not
   * silently dropped. A tensor or a second argument means a positional call (the form `materialize` once took).
   */
  args(raw: unknown, known: readonly string[], code: string, extra = 0): Record<string, unknown> {
    const form = `one object of named arguments, ${this.op}({ ${known.join(', ')} })`;
    if (extra > 0) this.fail('KV044', { arg: 'arguments', actual: `${extra + 1} positional arguments`, expected: form });
    if (raw === undefined || raw === null) return {};
    if (typeof raw !== 'object' || isTensor(raw)) this.fail('KV044', { arg: 'arguments', actual: isTensor(raw) ? 'a Tensor' : describeValue(raw), expected: form });
    for (const key of Object.keys(raw)) {
      if (!known.includes(key)) this.fail(code, { arg: key, op: this.op, expected: known.join(', ') });
    }
    return raw as Record<string, unknown>;
  }

  int(name: string, value: unknown, code: string, opts: { optional?: boolean; default?: DimExpr; binds?: string } = {}): number | undefined {
    let v = value;
    if (v === undefined && opts.default !== undefined) v = evalDim(opts.default, this.dims);
    if (v === undefined && opts.optional) return undefined;
    if (typeof v !== 'number' || !Number.isSafeInteger(v) || v <= 0) this.fail(code, { arg: name, actual: describeValue(v) });
    if (opts.binds) this.dims[opts.binds] = v;
    return v;
  }

  evenAtMost(name: string, value: number | undefined, atMost: DimExpr, code: string): void {
    if (value === undefined) return;
    const limit = evalDim(atMost, this.dims);
    if (value % 2 !== 0 || (limit !== undefined && value > limit)) this.fail(code, { arg: name, actual: value, expected: limit });
  }

  atMost(name: string, value: number | undefined, limit: number, code: string): void {
    if (value !== undefined && value > limit) this.fail(code, { arg: name, actual: value, expected: limit });
  }

  /** An int parameter no larger than another dim (`of`, bound before). */
  atMostDim(name: string, value: number | undefined, of: DimExpr, code: string): void {
    const limit = evalDim(of, this.dims);
    if (value !== undefined && limit !== undefined && value > limit) this.fail(code, { arg: name, actual: value, expected: limit, of });
  }

  /** The dim `dim` that tensor `name` bound is at least `min` (bound before). */
  dimAtLeast(name: string, t: OwnedTensor | undefined, dim: string, min: DimExpr, code: string): void {
    const value = this.dims[dim];
    const limit = evalDim(min, this.dims);
    if (t === undefined || value === undefined || limit === undefined || value >= limit) return;
    this.fail(code, { arg: name, actual: t.shape, dim, value, expected: limit, min });
  }

  /** A boolean parameter; `fallback` when omitted. */
  flag(name: string, value: unknown, fallback: boolean, code: string): boolean {
    if (value === undefined) return fallback;
    if (typeof value !== 'boolean') this.fail(code, { arg: name, expected: 'true or false', actual: describeValue(value) });
    return value;
  }

  multipleOf(name: string, value: number | undefined, of: DimExpr, code: string): void {
    const base = evalDim(of, this.dims);
    if (value === undefined || base === undefined) return;
    if (value % base !== 0) this.fail(code, { arg: name, actual: value, expected: base });
  }

  number(name: string, value: unknown, code: string, rule: { min?: number; above?: number; optional?: boolean }): number | undefined {
    if (value === undefined && rule.optional) return undefined;
    const ok =
      typeof value === 'number' &&
      // Kernels take these numbers as f32: 1e39 is finite here and Infinity there.
      Number.isFinite(Math.fround(value)) &&
      (rule.min === undefined || value >= rule.min) &&
      (rule.above === undefined || value > rule.above);
    if (!ok) this.fail(code, { arg: name, actual: describeValue(value), constraint: constraintText(rule) });
    return value as number;
  }

  choice<O extends string>(name: string, value: unknown, options: readonly O[], fallback: O, code: string): O {
    if (value === undefined) return fallback;
    if (typeof value !== 'string' || !options.includes(value as O)) this.fail(code, { arg: name, actual: describeValue(value), expected: options.join(' | ') });
    return value as O;
  }

  /** A list of `length` non-negative integers; with `sumsToHalfOf`, their sum is half that dim. */
  ints(name: string, value: unknown, code: string, rule: { length: number; sumsToHalfOf?: DimExpr; optional?: boolean }): readonly number[] | undefined {
    if (value === undefined && rule.optional) return undefined;
    const whole = rule.sumsToHalfOf === undefined ? undefined : evalDim(rule.sumsToHalfOf, this.dims);
    const total = whole === undefined ? undefined : whole / 2;
    const expected = `${rule.length} non-negative integers${total === undefined ? '' : ` summing to ${rule.sumsToHalfOf}/2 = ${total}`}`;
    const list = Array.isArray(value) ? (value as unknown[]) : undefined;
    const ok = list !== undefined && list.length === rule.length && list.every((x) => typeof x === 'number' && Number.isSafeInteger(x) && x >= 0);
    if (!ok) this.fail(code, { arg: name, actual: list && list.length <= 8 ? `[${list.map(describeValue).join(', ')}]` : describeValue(value), expected });
    const numbers = list as number[];
    if (total !== undefined && numbers.reduce((a, b) => a + b, 0) !== total) this.fail(code, { arg: name, actual: `[${numbers.join(', ')}]`, expected });
    // A copy: the caller's array may change after the call returns.
    return Object.freeze([...numbers]);
  }

  callback(name: string, value: unknown, code: string): (...args: never[]) => unknown {
    if (typeof value !== 'function') this.fail(code, { arg: name, actual: describeValue(value), expected: 'a function' });
    return value as (...args: never[]) => unknown;
  }

  /**
   * A tagged object parameter: a known tag, no key its variant lacks, every
   * required field present, each a finite number within its bounds, the
   * declared orders kept. Returns a frozen copy with the defaults filled in.
   */
  tagged(name: string, value: unknown, rule: TaggedRule, requiredGiven = true): Readonly<Record<string, unknown>> | undefined {
    if (value === undefined && rule.optional) return undefined;
    const tags = Object.keys(rule.variants);
    if (typeof value !== 'object' || value === null || Array.isArray(value) || isTensor(value)) {
      this.fail(rule.code, { arg: name, actual: describeValue(value), expected: `an object with ${rule.tag}: ${tags.join(' | ')}` });
    }
    const given = value as Record<string, unknown>;
    const tag = given[rule.tag];
    const variant = typeof tag === 'string' && Object.hasOwn(rule.variants, tag) ? rule.variants[tag]! : undefined;
    if (!variant) this.fail(rule.code, { arg: `${name}.${rule.tag}`, actual: describeValue(tag), expected: tags.join(' | ') });
    const fieldNames = Object.keys(variant.fields);
    const fieldList = fieldNames.length ? fieldNames.join(', ') : 'none';
    for (const key of Object.keys(given)) {
      if (key !== rule.tag && !fieldNames.includes(key)) this.fail(rule.fieldCode, { arg: `${name}.${key}`, problem: 'is not a field of', variant: tag, expected: fieldList });
    }
    const checked: Record<string, unknown> = { [rule.tag]: tag };
    for (const [field, f] of Object.entries(variant.fields)) {
      const arg = `${name}.${field}`;
      let v = given[field];
      if (v === undefined) {
        if (!f.optional) this.fail(rule.fieldCode, { arg, problem: 'is missing; it is a field of', variant: tag, expected: fieldList });
        if (f.default === undefined) continue;
        v = f.default;
      }
      const constraint = [f.integer ? 'an integer' : 'a finite number', f.min !== undefined ? `>= ${f.min}` : '', f.above !== undefined ? `> ${f.above}` : ''].filter(Boolean).join(' ');
      if (f.list) {
        checked[field] = this.#taggedList(arg, v, f, f.list, constraint);
        continue;
      }
      const isNumber = typeof v === 'number' && Number.isFinite(Math.fround(v)) && (!f.integer || Number.isSafeInteger(v));
      if (!isNumber) this.fail(rule.valueCode, { arg, actual: describeValue(v), constraint });
      const inBounds = (f.min === undefined || (v as number) >= f.min) && (f.above === undefined || (v as number) > f.above);
      if (!inBounds) this.fail(f.boundCode ?? rule.valueCode, { arg, actual: v, constraint });
      checked[field] = v;
    }
    for (const order of rule.orders ?? []) {
      const [lower, upper] = [checked[order.lower], checked[order.upper]];
      if (order.variant === tag && typeof lower === 'number' && typeof upper === 'number' && !(order.equalAllowed ? lower <= upper : lower < upper)) {
        this.fail(rule.comboCode, { arg: name, problem: `${order.lower} = ${lower} must be ${order.equalAllowed ? 'at most' : 'below'} ${order.upper} = ${upper}` });
      }
    }
    if (!requiredGiven && rule.requires) this.fail(rule.comboCode, { arg: name, problem: `it applies to ${rule.requires} only; leave it out with this argument set` });
    return Object.freeze(checked);
  }

  /** A list field of a tagged parameter: one finite entry within the field's bounds per pair of its dim, copied and frozen. */
  #taggedList(arg: string, value: unknown, f: Omit<TaggedField, 'doc'>, list: NonNullable<TaggedField['list']>, constraint: string): readonly number[] {
    const whole = evalDim(list.halfOf, this.dims);
    const count = whole === undefined ? undefined : whole / 2;
    const expected = count === undefined ? `${list.halfOf}/2` : `${list.halfOf}/2 = ${count}`;
    if (!Array.isArray(value) || (count !== undefined && value.length !== count)) {
      this.fail(list.lengthCode, { arg, expected, actual: Array.isArray(value) ? `${value.length} entries` : describeValue(value) });
    }
    const entries = value as unknown[];
    entries.forEach((x, index) => {
      const ok = typeof x === 'number' && Number.isFinite(Math.fround(x)) && (f.min === undefined || x >= f.min) && (f.above === undefined || x > f.above);
      if (!ok) this.fail(list.entryCode, { arg, index, actual: describeValue(x), constraint });
    });
    // A copy: the caller's array may change after the call returns.
    return Object.freeze([...(entries as number[])]);
  }

  /**
   * An interleaved layout of a section list (mRoPE's, Qwen3-VL): true only beside the list, whose counts after
   * the first, taken every third pair from offsets 1 and 2, must end inside the half-of-`halfOf` pairs.
   */
  interleavedSection(flag: string, on: boolean, sectionName: string, section: readonly number[] | undefined, halfOf: DimExpr, missingCode: string, code: string): void {
    if (!on) return;
    if (section === undefined) this.fail(missingCode, { arg: flag, other: sectionName });
    const whole = evalDim(halfOf, this.dims);
    if (whole === undefined) return;
    const pairs = whole / 2;
    const streams = ['height', 'width'] as const;
    streams.forEach((stream, i) => {
      const count = section![i + 1]!;
      // Stream i + 1 takes pairs i + 1, i + 4, ..., the last of them 3·count - 2 + i.
      const last = 3 * count - 2 + i;
      if (count > 0 && last >= pairs) {
        this.fail(code, { arg: sectionName, actual: `[${section!.join(', ')}]`, expected: pairs, problem: `the ${stream} stream's ${count} pairs (${i + 1}, ${i + 4}, ..., ${last}) run past pair ${pairs - 1}; every third pair from ${i + 1} holds at most ${Math.floor((pairs - 1 - (i + 1)) / 3) + 1} of them` });
      }
    });
  }

  /** Identity and dtype of a tensor argument: ours, alive, of an allowed dtype. */
  tensor(name: string, value: unknown, dtype: DTypeRule, opts: { optional?: boolean } = {}): OwnedTensor | undefined {
    if (value === undefined && opts.optional) return undefined;
    if (!isTensor(value)) this.fail('KV001', { arg: name, actual: describeValue(value) });
    if (value[TENSOR_OWNER] !== this.ctx.owner) {
      const owner = value[TENSOR_OWNER] as { label?: unknown } | null | undefined;
      this.fail('KV002', { arg: name, actual: typeof owner?.label === 'string' ? owner.label : `another ${describeValue(value.backend)} backend`, expected: this.ctx.label });
    }
    if (value.disposed) {
      const layer = value[LAYER_VIEW];
      if (layer !== undefined) this.fail('KV027', { arg: name, layer });
      this.fail('KV003', { arg: name });
    }
    if ('oneOf' in dtype) {
      if (!dtype.oneOf.includes(value.dtype)) this.fail('KV004', { arg: name, actual: value.dtype, expected: dtype.oneOf.join(', ') });
    } else {
      const other = this.dtypes[dtype.sameAs];
      const allowed = [...new Set([other, ...(dtype.or ?? [])])].filter((d): d is DType => d !== undefined);
      if (!allowed.includes(value.dtype)) this.fail('KV005', { arg: name, actual: value.dtype, expected: allowed.join(' or '), other: dtype.sameAs });
    }
    this.dtypes[name] = value.dtype;
    return value;
  }

  /**
   * Binds each unbound dim named by an axis and checks every other axis; a
   * wrong rank raises `rankCode` when the contract gives one. A flattenable
   * `[X]` also accepts `[X, 1]` and `[1, X]`.
   */
  shape(name: string, t: OwnedTensor | undefined, spec: readonly DimExpr[], code: string, opts: { rankCode?: string; flattenable?: boolean; streams?: StreamsCheck } = {}): void {
    if (t === undefined) return;
    let shape: Shape = t.shape;
    const streams = opts.streams;
    const flattens = (s: Shape) => opts.flattenable === true && spec.length === 1 && s.length === 2 && (s[0] === 1 || s[1] === 1);
    // Without its parameter, a flattenable [3, 1] is three tokens' positions, not three streams of one token.
    const streamed = streams !== undefined && shape.length === spec.length + 1 && shape[0] === streams.count && (streams.given || !flattens(shape));
    if (streams) {
      if (streams.given && !streamed) this.fail(streams.code, { arg: name, actual: t.shape, expected: this.expected([String(streams.count), ...spec]) });
      if (!streams.given && streamed) this.fail(streams.unexpectedCode, { arg: name, actual: t.shape, expected: this.expected(spec) });
      // Each stream is checked as the one-stream tensor would be.
      if (streamed) shape = shape.slice(1);
    }
    if (flattens(shape)) shape = [numel(shape)];
    if (shape.length !== spec.length) {
      if (opts.rankCode) this.fail(opts.rankCode, { arg: name, rank: spec.length, expected: `[${spec.join(', ')}]`, actual: t.shape });
      this.fail(code, { arg: name, actual: t.shape, expected: this.expected(spec), count: numel(t.shape) });
    }
    // Bind first, then compare, so the expected shape in a message shows every dim this tensor names.
    spec.forEach((expr, axis) => {
      if (isDimName(expr) && this.dims[expr] === undefined) this.dims[expr] = shape[axis]!;
    });
    const full = streamed ? [String(streams!.count), ...spec] : spec;
    spec.forEach((expr, axis) => {
      const want = evalDim(expr, this.dims);
      if (want !== undefined && want !== shape[axis]) this.fail(code, { arg: name, actual: t.shape, expected: this.expected(full), count: numel(t.shape) });
    });
  }

  /** `shape` for the shape a choice picks: that option's spec and codes, then the dims it implies. */
  shapeFor(name: string, t: OwnedTensor | undefined, picked: string, options: Readonly<Record<string, ChoiceShape>>, fallback: ChoiceShape): void {
    const spec = options[picked] ?? fallback;
    this.shape(name, t, spec.shape, spec.code, { rankCode: spec.rankCode });
    if (t === undefined) return;
    for (const [dim, expr] of Object.entries(spec.binds ?? {})) this.dims[dim] ??= evalDim(expr, this.dims)!;
  }

  /** A shape that is one of `specs`, every dim of them already bound (a scale `[1]` or `[H]`). */
  shapeIn(name: string, t: OwnedTensor | undefined, specs: readonly (readonly DimExpr[])[], code: string): void {
    if (t === undefined) return;
    const fits = (spec: readonly DimExpr[]) => spec.length === t.shape.length && spec.every((e, axis) => evalDim(e, this.dims) === t.shape[axis]);
    if (!specs.some(fits)) this.fail(code, { arg: name, actual: t.shape, expected: specs.map((s) => this.expected(s)).join(' or '), count: numel(t.shape) });
  }

  /** The tensors `names` are given exactly when `tensor`'s dtype is one of `dtypes`. */
  givenForDtype(names: readonly string[], given: readonly unknown[], tensor: string, dtypes: readonly DType[], missingCode: string, refusedCode: string): void {
    const dtype = this.dtypes[tensor];
    if (dtype === undefined) return;
    const needed = dtypes.includes(dtype);
    names.forEach((name, i) => {
      if (needed && given[i] === undefined) this.fail(missingCode, { arg: name, other: tensor, actual: dtype });
      if (!needed && given[i] !== undefined) this.fail(refusedCode, { arg: name, other: tensor, actual: dtype });
    });
  }

  /** `name` given exactly when one of `others` is. */
  requires(name: string, value: unknown, others: readonly string[], given: readonly unknown[], code: string): void {
    const present = others.filter((_, i) => given[i] !== undefined);
    if ((value === undefined) !== (present.length === 0)) {
      this.fail(code, value === undefined ? { arg: name, actual: `${present.join(' and ')} without ${name}`, expected: others.join(' or ') } : { arg: name, actual: `${name} without ${others.join(' or ')}`, expected: others.join(' or ') });
    }
  }

  exactlyOne(names: readonly string[], given: readonly unknown[], code: string): void {
    const present = names.filter((_, i) => given[i] !== undefined);
    if (present.length !== 1) this.fail(code, { actual: present.length === 0 ? 'neither' : present.join(' and ') });
  }

  /** The two tensors, when both given, share no storage: not the same tensor, nor views whose spans overlap. */
  distinct(names: readonly [string, string], a: OwnedTensor | number | undefined, b: OwnedTensor | number | undefined, code: string): void {
    if (typeof a === 'object' && typeof b === 'object' && storageOverlaps(a, b)) this.fail(code, { arg: names[0], other: names[1] });
  }

  /** Tensors written in place (outputs, pools) are row-major without gaps; an offset into their storage is fine. */
  contiguous(names: readonly string[], given: readonly (OwnedTensor | undefined)[], code: string): void {
    given.forEach((t, i) => {
      if (t !== undefined && !isContiguous(t.shape, layoutOf(t).strides)) this.fail(code, { arg: names[i], actual: `[${t.strides.join(', ')}]`, shape: t.shape });
    });
  }

  /**
   * Checks index values (or a float parameter's) now where the backend holds
   * them on the host; otherwise hands the rule to the device. A number given
   * in place of the tensor (`orNumber`) was checked as a number already.
   */
  values(name: string, t: OwnedTensor | number | undefined, rule: ValueRuleSpec, code: string): void {
    if (t === undefined || typeof t === 'number') return;
    const bounds = valueBounds(this.op, name, rule, rule.below === undefined ? undefined : evalDim(rule.below, this.dims), code);
    if (rule.duplicates) this.duplicates[name] = rule.duplicates;
    const host = this.ctx.hostValues?.(t);
    if (host === undefined) {
      this.deviceChecks.push({ ...bounds, tensor: t });
      return;
    }
    for (let i = 0; i < host.length; i++) {
      if (breaksValueRule(bounds, host[i]!)) throw valueRuleError(bounds, i, host[i]!, this.dims);
    }
  }

  /** An offsets tensor (indptr): checked now where its values are on the host, else handed to the device. */
  offsets(name: string, t: OwnedTensor | undefined, total: DimExpr, code: string): void {
    if (t === undefined) return;
    const totalValue = evalDim(total, this.dims);
    if (totalValue === undefined) throw new Error(`${this.op}: the total of ${name}'s offsets, ${total}, is not bound when it is checked`);
    // No entry at all is known from the shape alone, so every backend refuses it here.
    if (t.shape[0] === 0) this.fail(code, { arg: name, index: 0, actual: 'nothing', problem: 'an indptr holds B + 1 entries, at least the 0 it starts with' });
    const rule: OffsetsBounds = { kind: 'offsets', arg: name, totalName: total, total: totalValue, code, op: this.op };
    const host = this.ctx.hostValues?.(t);
    if (host === undefined) {
      this.deviceSegmentChecks.push({ ...rule, tensor: t });
      return;
    }
    const broken = firstOffsetsBreak(host, totalValue);
    if (broken) throw offsetsRuleError(rule, broken.index, host[broken.index]!, broken.how, this.dims);
  }

  /** Each segment of `name` no longer than the same segment of `within` (both offsets tensors checked before). */
  segmentsWithin(name: string, t: OwnedTensor | undefined, within: string, withinT: OwnedTensor | undefined, code: string): void {
    if (t === undefined || withinT === undefined) return;
    const rule: SegmentsWithinBounds = { kind: 'segmentsWithin', arg: name, within, code, op: this.op };
    const host = this.ctx.hostValues?.(t);
    const hostWithin = this.ctx.hostValues?.(withinT);
    if (host === undefined || hostWithin === undefined) {
      this.deviceSegmentChecks.push({ ...rule, tensor: t, withinTensor: withinT });
      return;
    }
    const longer = firstLongerSegment(host, hostWithin);
    if (longer) throw segmentsWithinError(rule, longer.index, longer.length, longer.limit, this.dims);
  }

  /** `[L, T, H, D] = [2, 4, 2, 8]`, with `?` for dims not bound yet. */
  private expected(spec: readonly DimExpr[]): string {
    const values = spec.map((e) => evalDim(e, this.dims) ?? '?');
    return `[${spec.join(', ')}] = [${values.join(', ')}]`;
  }
}

function constraintText(rule: { min?: number; above?: number }): string {
  if (rule.above !== undefined) return `> ${rule.above}`;
  if (rule.min !== undefined) return `>= ${rule.min}`;
  return '';
}

/** A value passed where a backend was expected: a backend by its label, anything else as describeValue puts it. */
export function describeBackend(v: unknown): string {
  const label = typeof v === 'object' && v !== null ? (v as { label?: unknown }).label : undefined;
  return typeof label === 'string' ? label : describeValue(v);
}

/** A short, safe description of any value for a message: never throws, never dumps a large array. */
export function describeValue(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === null) return 'null';
  if (typeof v === 'number' || typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (typeof v === 'function') return 'a function';
  if (Array.isArray(v)) return `an Array of length ${v.length}`;
  if (ArrayBuffer.isView(v)) return `a ${v.constructor.name}`;
  const ctor = (v as object).constructor?.name;
  return ctor && ctor !== 'Object' ? `a ${ctor}` : 'a plain object';
}
