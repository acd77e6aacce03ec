import { DTYPES, isContractError, numel } from '@kvkit/contracts';
import type { Backend, DType, Tensor } from '@kvkit/contracts';
import { allErrors } from '@kvkit/contracts/dsl';
import fc from 'fast-check';
import { randomValues, Rng } from '../data.js';
import { compare } from '../tolerances.js';
import { readFloats, Scope, untyped } from '../tensors.js';
import type { UntypedMaterializer } from '../tensors.js';
import { attentionSpec, buildArgs, copySpec, createSpec, fusedSpec, isTensorSpec, makeTensor, materializerCallSpec, ropePoolSpec } from './callSpecs.js';
import type { CallSpec, ParamSpec, TensorSpec } from './callSpecs.js';
import { attentionConfigs, copyConfigs, fusedConfigs, materializerConfigs, ropePoolConfigs } from './configs.js';
import type { AttentionConfig, CopyConfig, FusedConfig, MaterializerConfig, RopePoolConfig } from './configs.js';

/**
 * A valid random call with exactly one thing broken: a shape axis, the
 * rank, a dtype, a parameter, an index value, a tensor of another backend,
 * a disposed or missing tensor, an unknown argument. Whatever it is, the
 * answer is a ContractError with a catalog code, thrown by the call (or, for
 * a value held on the device, by the next sync), and no caller-owned output
 * or pool changes, except, at sync, the rows of the tokens that were fine.
 * pagedAttention and copySlots answer with the very code the CPU reference
 * throws for the same arguments, and write nothing at all.
 */

export type BrokenOp = 'fusedNormRopeStacked' | 'ropePoolFused' | 'createKvMaterializer' | 'KvMaterializer.materialize' | 'KvMaterializer.materializeInto' | 'pagedAttention' | 'copySlots';

/**
 * The read-side ops: their broken calls must throw the code the CPU
 * reference throws for the same arguments, and write nothing even when the
 * device finds the error (their kernels gate on the call's flag word).
 */
const READ_SIDE: ReadonlySet<BrokenOp> = new Set(['pagedAttention', 'copySlots']);

/** Codes of the rules an op checks on a GPU (offsets, segments, slot and scale values): reported at sync there, whatever was changed. */
const FOUND_ON_DEVICE: Partial<Record<BrokenOp, readonly string[]>> = { pagedAttention: ['KV019', 'KV078', 'KV079', 'KV080'], copySlots: ['KV019', 'KV038'] };

/** Ops that take a ropeStyle. */
const STYLED: ReadonlySet<BrokenOp> = new Set(['fusedNormRopeStacked', 'ropePoolFused', 'createKvMaterializer']);

interface BaseCall {
  readonly op: BrokenOp;
  readonly spec: CallSpec;
  /** The materializer a method call runs on (built valid, before the broken call). */
  readonly materializer?: MaterializerConfig;
}

export type Break =
  | { readonly kind: 'axis'; readonly arg: string; readonly axis: number; readonly dim: number }
  | { readonly kind: 'rank'; readonly arg: string; readonly shape: readonly number[] }
  | { readonly kind: 'dtype'; readonly arg: string; readonly dtype: DType }
  | { readonly kind: 'foreign'; readonly arg: string; readonly on: 'another instance' | 'the CPU reference' }
  | { readonly kind: 'disposed'; readonly arg: string }
  | { readonly kind: 'missing'; readonly arg: string }
  | { readonly kind: 'param'; readonly arg: string; readonly value: unknown }
  | { readonly kind: 'unknown'; readonly arg: string }
  /** An index value out of its bounds: on a GPU found on the device, so the next sync may report it. */
  | { readonly kind: 'value'; readonly arg: string; readonly values: readonly number[]; readonly badTokens: readonly number[] }
  /** A cos/sin cache cut to `rows`, so the tokens at later positions read past it. */
  | { readonly kind: 'short cache'; readonly arg: 'cosSinCache'; readonly rows: number; readonly badTokens: readonly number[] };

const HUGE_DIM = 2 ** 40;
const UNKNOWN_KEYS = ['rotary_dim', 'num_kv_heads', 'kout', 'slot', 'position'];
const BAD_STYLES: readonly unknown[] = ['llama', 'NEOX', 1, ''];

function dtypesBrokenFor(arg: TensorSpec, anchor: DType): DType[] {
  const index: DType[] = ['i32', 'i64'];
  const float: DType[] = ['f32', 'f16', 'bf16'];
  switch (arg.role) {
    case 'anchor':
    case 'float':
      return index;
    case 'index':
      return float;
    case 'same':
      return DTYPES.filter((d) => d !== anchor);
    case 'weight':
      return DTYPES.filter((d) => d !== anchor && d !== 'f32');
    case 'f32':
      return DTYPES.filter((d) => d !== 'f32');
    case 'own':
      return DTYPES.filter((d) => d !== arg.dtype);
  }
}

function paramValuesBrokenFor(p: ParamSpec, headDim: number): unknown[] {
  const v = p.value;
  const n = typeof v === 'number' ? v : Number.NaN;
  switch (p.kind) {
    case 'dim':
      return [0, -n, n + 0.5, Number.NaN, Number.POSITIVE_INFINITY, String(n), 2 ** 53, n + 1, 2 ** 31 - 1, HUGE_DIM];
    case 'rotary':
      return [0, -2, n + 1, headDim + 2, Number.NaN, String(n)];
    case 'hint':
      return [0, -1, 1.5, Number.NaN, '64'];
    case 'base':
      return [0, -n, Number.NaN, Number.POSITIVE_INFINITY, String(n)];
    case 'eps':
      return [-1e-6, Number.NaN, String(n)];
    case 'style':
      return [...BAD_STYLES];
    case 'flag':
      return ['yes', 1, 'true'];
    case 'positive':
      return [0, -n, Number.NaN, Number.POSITIVE_INFINITY, String(n)];
    case 'window':
      return [0, -1, 1.5, Number.NaN, String(n)];
    case 'layout':
      return ['NDH', 'hnd', 1, ''];
  }
}

function shapeOf(spec: CallSpec, name: string): readonly number[] {
  const a = spec.args[name];
  return a && isTensorSpec(a) ? a.shape : [];
}

/** One entry of an index or scale tensor changed. */
function withEntry(spec: CallSpec, arg: string, i: number, value: number): Break {
  const values = Array.from((spec.args[arg] as TensorSpec).values);
  values[i] = value;
  return { kind: 'value', arg, values, badTokens: [] };
}

/** fp8 scales that are 0, negative, NaN or infinite (KV019). */
function scaleBreaks(spec: CallSpec): Break[] {
  return Object.keys(spec.args)
    .filter((name) => name.endsWith('Scale'))
    .flatMap((name) => [0, -0.5, Number.NaN, Number.POSITIVE_INFINITY].map((v) => withEntry(spec, name, (spec.args[name] as TensorSpec).values.length - 1, v)));
}

/** pagedAttention's offsets, segments and slots, and copySlots' slots, out of their rules one entry at a time. */
function readSideValueBreaks(base: BaseCall): Break[] {
  const { spec } = base;
  const values = (name: string) => Array.from((spec.args[name] as TensorSpec).values);
  const wide = (name: string) => (spec.args[name] as TensorSpec).dtype === 'i64';
  const out = scaleBreaks(spec);
  if (base.op === 'copySlots') {
    const slotsOf = (pool: string) => {
      const shape = shapeOf(spec, pool);
      return shape.length === 4 ? shape[0]! * shape[2]! : shape[0]!;
    };
    for (const [name, S] of [['fromSlots', slotsOf('kSrc')], ['toSlots', slotsOf('kDst')]] as const) {
      const last = values(name).length - 1;
      if (last < 0) continue;
      out.push(withEntry(spec, name, 0, S), withEntry(spec, name, last, S + 5), withEntry(spec, name, last, wide(name) ? 2 ** 40 : 2 ** 31 - 1));
    }
    return out;
  }
  const q = values('qIndptr');
  const kv = values('kvIndptr');
  const slots = values('kvSlots');
  const B = q.length - 1;
  const shape = shapeOf(spec, 'kPool');
  const S = shape.length === 4 ? shape[0]! * shape[2]! : shape[0]!;
  if (slots.length > 0) {
    const last = slots.length - 1;
    out.push(withEntry(spec, 'kvSlots', 0, S), withEntry(spec, 'kvSlots', last, S + 3), withEntry(spec, 'kvSlots', last, -1), withEntry(spec, 'kvSlots', 0, wide('kvSlots') ? 2 ** 40 : 2 ** 31 - 1));
  }
  // Offsets that do not start at 0, end past their total or go backwards.
  out.push(withEntry(spec, 'qIndptr', 0, 1), withEntry(spec, 'qIndptr', B, q[B]! + 1), withEntry(spec, 'kvIndptr', B, kv[B]! + 2));
  if (kv[B]! > 0) out.push(withEntry(spec, 'kvIndptr', B, kv[B]! - 1));
  for (let b = 1; b < B; b++) out.push(withEntry(spec, 'qIndptr', b, q[b + 1]! + 1));
  // A query moved across the boundary of requests b and b + 1, to one with no cached token to spare: more queries than cached tokens.
  const qLen = (r: number) => q[r + 1]! - q[r]!;
  const kvLen = (r: number) => kv[r + 1]! - kv[r]!;
  for (let b = 0; b + 1 < B; b++) {
    if (qLen(b + 1) > 0 && qLen(b) + 1 > kvLen(b)) out.push(withEntry(spec, 'qIndptr', b + 1, q[b + 1]! + 1));
    if (qLen(b) > 0 && qLen(b + 1) + 1 > kvLen(b + 1)) out.push(withEntry(spec, 'qIndptr', b + 1, q[b + 1]! - 1));
  }
  return out;
}

/** Out-of-bounds index values the contracts check, one token at a time. */
function valueBreaks(base: BaseCall): Break[] {
  if (READ_SIDE.has(base.op)) return readSideValueBreaks(base);
  const out: Break[] = [];
  const spec = base.spec;
  const positions = spec.args.positions as TensorSpec | undefined;
  const slots = spec.args.slots as TensorSpec | undefined;
  const wide = (t: TensorSpec) => t.dtype === 'i64';
  const at = (t: TensorSpec, i: number, value: number): Break => {
    const values = Array.from(t.values);
    values[i] = value;
    return { kind: 'value', arg: t === positions ? 'positions' : 'slots', values, badTokens: [i] };
  };
  const tokens = positions?.values.length ?? 0;
  const last = tokens - 1;
  const m = base.materializer;
  const P = base.op === 'fusedNormRopeStacked' ? shapeOf(spec, 'cosSinCache')[0]! : m?.rope.kind === 'cosSinCache' ? m.rope.P : undefined;
  if (positions && tokens > 0 && base.op !== 'ropePoolFused') {
    out.push(at(positions, 0, -1), at(positions, last, wide(positions) ? -(2 ** 40) : -(2 ** 31)));
    if (P !== undefined) out.push(at(positions, last, P), at(positions, 0, P + 5));
    else if (wide(positions)) out.push(at(positions, last, 2 ** 31));
  }
  if (base.op === 'fusedNormRopeStacked' && tokens > 0) {
    const pos = Array.from(positions!.values);
    const rows = Math.max(...pos);
    out.push({ kind: 'short cache', arg: 'cosSinCache', rows, badTokens: pos.flatMap((p, t) => (p >= rows ? [t] : [])) });
  }
  if (slots && tokens > 0) {
    const S = base.op === 'ropePoolFused' ? shapeOf(spec, 'kPool')[0]! : shapeOf(spec, 'kPool')[1]!;
    out.push(at(slots, 0, S), at(slots, last, S + 3), at(slots, last, wide(slots) ? 2 ** 40 : 2 ** 31 - 1));
  }
  return out;
}

/** Every single change to `base` that the contracts refuse. */
export function breaksOf(base: BaseCall): Break[] {
  const { spec } = base;
  const out: Break[] = [];
  for (const [arg, a] of Object.entries(spec.args)) {
    if (!isTensorSpec(a)) {
      for (const value of paramValuesBrokenFor(a, spec.headDim)) out.push({ kind: 'param', arg, value });
      if (!a.optional) out.push({ kind: 'missing', arg });
      continue;
    }
    a.shape.forEach((d, axis) => {
      if (a.freeAxes?.includes(axis)) return;
      const fine = (dim: number) => a.alsoValid?.some((shape) => shape.length === a.shape.length && shape.every((x, i) => x === (i === axis ? dim : a.shape[i])));
      for (const dim of new Set([0, d + 1, d - 1, 2 * d + 3, HUGE_DIM])) if (dim >= 0 && dim !== d && !fine(dim)) out.push({ kind: 'axis', arg, axis, dim });
    });
    out.push({ kind: 'rank', arg, shape: [...a.shape, 1, 1] });
    // A flattenable [T, 1] or [1, T] loses its unit axis and stays valid.
    if (a.shape.length > 0 && !a.flattenable) out.push({ kind: 'rank', arg, shape: a.shape.slice(0, -1) });
    for (const dtype of dtypesBrokenFor(a, spec.anchorDType)) out.push({ kind: 'dtype', arg, dtype });
    out.push({ kind: 'foreign', arg, on: 'another instance' }, { kind: 'foreign', arg, on: 'the CPU reference' }, { kind: 'disposed', arg });
    if (!a.optional) out.push({ kind: 'missing', arg });
  }
  if (!('ropeStyle' in spec.args) && STYLED.has(base.op)) {
    for (const value of BAD_STYLES) out.push({ kind: 'param', arg: 'ropeStyle', value });
  }
  for (const arg of UNKNOWN_KEYS) out.push({ kind: 'unknown', arg });
  return [...out, ...valueBreaks(base)];
}

/** What a broken call is drawn from: the op and its config (printed as the counterexample). */
type Drawn =
  | { readonly op: 'fusedNormRopeStacked'; readonly config: FusedConfig }
  | { readonly op: 'ropePoolFused'; readonly config: RopePoolConfig }
  | { readonly op: 'pagedAttention'; readonly config: AttentionConfig }
  | { readonly op: 'copySlots'; readonly config: CopyConfig }
  | { readonly op: 'createKvMaterializer' | 'KvMaterializer.materialize' | 'KvMaterializer.materializeInto'; readonly config: MaterializerConfig };

export type BrokenCall = Drawn & { readonly broken: Break };

export function baseOf(x: Drawn): BaseCall {
  switch (x.op) {
    case 'fusedNormRopeStacked':
      // Outputs given by the caller, so there is something of theirs to watch.
      return { op: x.op, spec: fusedSpec({ ...x.config, outputs: 'given' }) };
    case 'ropePoolFused':
      return { op: x.op, spec: ropePoolSpec(x.config) };
    case 'createKvMaterializer':
      return { op: x.op, spec: createSpec(x.config) };
    case 'pagedAttention':
      return { op: x.op, spec: attentionSpec(x.config) };
    case 'copySlots':
      return { op: x.op, spec: copySpec(x.config) };
    default:
      return { op: x.op, spec: materializerCallSpec(x.config, 0), materializer: x.config };
  }
}

/** A drawn call with one of its breaks. */
function withOneBreak(drawn: fc.Arbitrary<Drawn>): fc.Arbitrary<BrokenCall> {
  return drawn.chain((x) => {
    // A kind first, then one break of it: axis changes far outnumber the rest, value breaks would hardly come up.
    const all = breaksOf(baseOf(x));
    const kinds = [...new Set(all.map((b) => b.kind))];
    return fc
      .constantFrom(...kinds)
      .chain((kind) => fc.constantFrom(...all.filter((b) => b.kind === kind)))
      .map((broken) => ({ ...x, broken }) as BrokenCall);
  });
}

export const brokenCalls: fc.Arbitrary<BrokenCall> = withOneBreak(
  fc.oneof(
    fusedConfigs.map((config) => ({ op: 'fusedNormRopeStacked' as const, config })),
    ropePoolConfigs.map((config) => ({ op: 'ropePoolFused' as const, config })),
    materializerConfigs.map((config) => ({ op: 'createKvMaterializer' as const, config })),
    materializerConfigs.map((config) => ({ op: `KvMaterializer.${config.calls[0]!.entry}` as const, config })),
  ),
);

/** Broken calls of pagedAttention and copySlots, of those of the two in `ops` (what a backend runs). */
export function readSideBrokenCalls(ops: readonly string[]): fc.Arbitrary<BrokenCall> {
  const drawn: fc.Arbitrary<Drawn>[] = [];
  if (ops.includes('pagedAttention')) drawn.push(attentionConfigs.map((config) => ({ op: 'pagedAttention' as const, config })));
  if (ops.includes('copySlots')) drawn.push(copyConfigs.map((config) => ({ op: 'copySlots' as const, config })));
  return withOneBreak(fc.oneof(...drawn));
}

export function describeBreak(b: Break): string {
  switch (b.kind) {
    case 'axis':
      return `${b.arg} axis ${b.axis} = ${b.dim}`;
    case 'rank':
      return `${b.arg} shape [${b.shape.join(', ')}]`;
    case 'dtype':
      return `${b.arg} dtype ${b.dtype}`;
    case 'foreign':
      return `${b.arg} made by ${b.on}`;
    case 'disposed':
    case 'missing':
      return `${b.arg} ${b.kind}`;
    case 'param':
      return `${b.arg} = ${fc.stringify(b.value)}`;
    case 'unknown':
      return `unknown argument ${b.arg}`;
    case 'value':
      return `${b.arg} = [${b.values.join(', ')}]`;
    case 'short cache':
      return `cosSinCache cut to ${b.rows} rows`;
  }
}

const isIndexDType = (d: DType) => d === 'i32' || d === 'i64';

/** A tensor of `a` but for `over`: index values stay valid (repeated), floats keep their values where the size allows. */
function variant(scope: Scope, a: TensorSpec, over: Partial<TensorSpec>, rng: Rng): Tensor {
  const next = { ...a, ...over };
  const n = numel(next.shape);
  let values: ArrayLike<number>;
  if (!isIndexDType(next.dtype)) values = a.role !== 'index' && n === a.values.length ? a.values : randomValues(rng, n);
  else if (a.role === 'index') values = Array.from({ length: n }, (_, i) => (a.values.length > 0 ? Math.max(0, a.values[i % a.values.length]!) : 0));
  else values = Array.from({ length: n }, (_, i) => i % 3);
  return makeTensor(scope, { ...next, values });
}

interface Prepared {
  readonly args: Record<string, unknown>;
  /** Tensors that must not change, on the backend that reads them. */
  readonly watched: { name: string; tensor: Tensor; on: Backend }[];
  /** Made inside the call (a huge shape must fail there, as the user would see it). */
  readonly late?: () => Tensor;
}

/** Builds the base arguments on `s`, then applies the one break. */
function prepare(base: BaseCall, broken: Break, s: Scope, twin: Scope, cpu: Scope, rng: Rng): Prepared {
  const made = new Map<string, Tensor>();
  const args = buildArgs(s, base.spec, false, made);
  const watched = [...made].filter(([name]) => (base.spec.args[name] as TensorSpec).watched).map(([name, tensor]) => ({ name, tensor, on: s.backend }));
  const a = base.spec.args[broken.arg] as TensorSpec;
  const replace = (t: Tensor, on: Scope) => {
    args[broken.arg] = t;
    if (a?.watched && !isIndexDType(t.dtype)) watched.push({ name: `${broken.arg} (${describeBreak(broken)})`, tensor: t, on: on.backend });
  };
  switch (broken.kind) {
    case 'axis': {
      const shape = a.shape.map((d, i) => (i === broken.axis ? broken.dim : d));
      if (numel(shape) > 2 ** 24) return { args, watched, late: () => s.backend.tensor(a.dtype, shape) };
      replace(variant(s, a, { shape }, rng), s);
      break;
    }
    case 'rank':
      replace(variant(s, a, { shape: broken.shape }, rng), s);
      break;
    case 'dtype':
      replace(variant(s, a, { dtype: broken.dtype }, rng), s);
      break;
    case 'foreign': {
      const on = broken.on === 'another instance' ? twin : cpu;
      replace(makeTensor(on, a), on);
      break;
    }
    case 'disposed': {
      const t = makeTensor(s, a);
      t.dispose();
      args[broken.arg] = t;
      break;
    }
    case 'missing':
      args[broken.arg] = undefined;
      break;
    case 'param':
      args[broken.arg] = broken.value;
      break;
    case 'unknown':
      args[broken.arg] = 1;
      break;
    case 'value':
      args[broken.arg] = makeTensor(s, { ...a, values: broken.values });
      break;
    case 'short cache': {
      const cache = base.spec.args.cosSinCache as TensorSpec;
      const R = cache.shape[1]!;
      args.cosSinCache = makeTensor(s, { ...cache, shape: [broken.rows, R], values: Array.from(cache.values).slice(0, broken.rows * R) });
      break;
    }
  }
  return { args, watched };
}

/** Rows (of H*D elements) of each watched tensor that tokens other than `bad` may write before a sync-time error. */
function rowsGoodTokensWrite(base: BaseCall, bad: readonly number[], watched: Prepared['watched']): Map<Tensor, Set<number>> {
  const allowed = new Map<Tensor, Set<number>>();
  const spec = base.spec;
  const slotsOf = (): number[] => Array.from((spec.args.slots as TensorSpec).values);
  for (const w of watched) {
    const rows = new Set<number>();
    if (base.op === 'fusedNormRopeStacked') {
      const [L, T] = w.tensor.shape as [number, number];
      for (let l = 0; l < L; l++) for (let t = 0; t < T; t++) if (!bad.includes(t)) rows.add(l * T + t);
    } else {
      const layered = w.tensor.shape.length === 4;
      const [L, S] = layered ? (w.tensor.shape as [number, number]) : [1, w.tensor.shape[0]!];
      slotsOf().forEach((slot, n) => {
        if (bad.includes(n) || slot < 0 || slot >= S) return;
        for (let l = 0; l < L; l++) rows.add(l * S + slot);
      });
    }
    allowed.set(w.tensor, rows);
  }
  return allowed;
}

function invoke(base: BaseCall, backend: Backend, m: UntypedMaterializer | undefined, args: Record<string, unknown>, layersSeen: { count: number }): unknown {
  switch (base.op) {
    case 'fusedNormRopeStacked':
      return untyped(backend).fusedNormRopeStacked(args);
    case 'ropePoolFused':
      return untyped(backend).ropePoolFused(args);
    case 'createKvMaterializer':
      return untyped(backend).createKvMaterializer(args);
    case 'KvMaterializer.materialize':
      return m!.materialize({ ...args, writeLayerKv: () => void layersSeen.count++ });
    case 'KvMaterializer.materializeInto':
      return m!.materializeInto(args);
    case 'pagedAttention':
      return untyped(backend).pagedAttention(args);
    case 'copySlots':
      return untyped(backend).copySlots(args);
  }
}

/** Disposes what an accepted call made; outputs the caller passed in stay theirs. */
function disposeResult(v: unknown, args: Record<string, unknown>): void {
  if (typeof v !== 'object' || v === null) return;
  const given = new Set(Object.values(args));
  const o = v as Record<string, { dispose?: () => void; disposed?: boolean } | undefined>;
  if (typeof (v as { dispose?: unknown }).dispose === 'function') (v as { dispose(): void }).dispose();
  for (const key of ['kOut', 'vOut', 'qRot', 'kRot', 'out', 'lse']) if (o[key] && !given.has(o[key]) && !o[key]!.disposed) o[key]!.dispose?.();
}

function thrown(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : `a non-Error ${String(e)}`;
}

export interface BrokenCallBackends {
  readonly backend: Backend;
  /** A second instance of the backend under test. */
  readonly twin: Backend;
  readonly cpu: Backend;
  /** A second CPU instance, for the reference's run of a read-side call (its foreign tensors). */
  readonly cpuTwin?: Backend;
}

/** The code the CPU reference throws for the same broken call (at the call, or at its sync), or 'accepted'. */
async function referenceCode(on: BrokenCallBackends, base: BaseCall, broken: Break): Promise<string> {
  if (!on.cpuTwin) throw new Error(`${base.op}: a read-side broken call needs BrokenCallBackends.cpuTwin`);
  const r = new Scope(on.cpu);
  const other = new Scope(on.cpuTwin);
  try {
    const p = prepare(base, broken, r, other, other, new Rng(0x0b5e55ed));
    try {
      const args = p.late ? { ...p.args, [broken.arg]: p.late() } : p.args;
      disposeResult(invoke(base, on.cpu, undefined, args, { count: 0 }), args);
      await on.cpu.sync();
    } catch (e) {
      return isContractError(e) ? e.code : `a non-ContractError (${thrown(e)})`;
    }
    return 'accepted';
  } finally {
    r.dispose();
    other.dispose();
  }
}

/** Runs one broken call and throws what went wrong, if anything. */
export async function checkBrokenCall(on: BrokenCallBackends, call: BrokenCall): Promise<void> {
  const base = baseOf(call);
  const { broken } = call;
  const { backend } = on;
  const s = new Scope(backend);
  const twin = new Scope(on.twin);
  const cpu = new Scope(on.cpu);
  const what = `${base.op} with ${describeBreak(broken)}`;
  try {
    const rng = new Rng(0x0b5e55ed);
    const m = base.materializer ? s.owned(untyped(backend).createKvMaterializer(buildArgs(s, createSpec(base.materializer)))) : undefined;
    const p = prepare(base, broken, s, twin, cpu, rng);
    await backend.sync();
    const before = await Promise.all(p.watched.map((w) => readFloats(w.on, w.tensor)));
    const layersSeen = { count: 0 };
    let error: unknown;
    let atSync = false;
    try {
      const args = p.late ? { ...p.args, [broken.arg]: p.late() } : p.args;
      disposeResult(invoke(base, backend, m, args, layersSeen), args);
    } catch (e) {
      error = e;
    }
    if (error === undefined) {
      try {
        await backend.sync();
      } catch (e) {
        error = e;
        atSync = true;
      }
    } else {
      await backend.sync().catch((e: unknown) => {
        throw new Error(`${what}: sync() after the rejected call threw too: ${thrown(e)}`);
      });
    }
    if (error === undefined) throw new Error(`${what}: accepted (the call and sync() both succeeded)`);
    if (!isContractError(error)) throw new Error(`${what}: threw ${thrown(error)}, not a ContractError`);
    if (!(error.code in allErrors)) throw new Error(`${what}: code ${error.code} is not in the catalog (${error.message})`);
    if (READ_SIDE.has(base.op)) {
      const expected = await referenceCode(on, base, broken);
      if (error.code !== expected) throw new Error(`${what}: threw ${error.code} (${error.message}); the CPU reference's answer to the same arguments is ${expected}`);
    }
    const deviceValue = broken.kind === 'value' || broken.kind === 'short cache' || (FOUND_ON_DEVICE[base.op]?.includes(error.code) ?? false);
    if (atSync && !deviceValue) throw new Error(`${what}: ${error.code} came at sync(); a shape, dtype or argument error is thrown before anything is enqueued`);
    if (!atSync && layersSeen.count > 0) throw new Error(`${what}: writeLayerKv was called ${layersSeen.count} time(s) before ${error.code} was thrown`);
    const allowed = atSync && deviceValue && !READ_SIDE.has(base.op) ? rowsGoodTokensWrite(base, 'badTokens' in broken ? broken.badTokens : [], p.watched) : new Map<Tensor, Set<number>>();
    const after = await Promise.all(p.watched.map((w) => readFloats(w.on, w.tensor)));
    const changed: string[] = [];
    p.watched.forEach((w, i) => {
      const rows = allowed.get(w.tensor) ?? new Set<number>();
      const shape = w.tensor.shape;
      const rowSize = shape.length >= 2 ? shape[shape.length - 1]! * shape[shape.length - 2]! : 1;
      const keep = (_: number, j: number) => !rows.has(Math.floor(j / rowSize));
      const cmp = compare(`${w.name} after ${error.code}${atSync ? ' (at sync)' : ''}`, after[i]!.filter(keep), before[i]!.filter(keep), 'bit-exact');
      if (!cmp.ok) changed.push(cmp.message);
    });
    if (changed.length > 0) throw new Error(`${what}: wrote before failing:\n${changed.join('\n')}`);
    if (atSync) {
      await backend.sync().catch((e: unknown) => {
        throw new Error(`${what}: a second sync() threw again (a device error is reported once): ${thrown(e)}`);
      });
    }
  } finally {
    s.dispose();
    twin.dispose();
    cpu.dispose();
  }
}
