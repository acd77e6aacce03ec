import type { DType, FloatDType, IndexDType, PoolDType, Tensor } from '@kvkit/contracts';
import { isFp8, numel } from '@kvkit/contracts';
import { decodeFp8, encodeFp8 } from '@kvkit/contracts/backend';
import { buildCosSinCache, epsPerLayer, patternValues, randomPositive, randomValues, Rng, roundToDType } from '../data.js';
import type { Scope } from '../tensors.js';
import type { AttentionConfig, CopyConfig, CopySide, FusedConfig, MaterializerCall, MaterializerConfig, PoolLayout, RopePoolConfig } from './configs.js';

/**
 * One op call as data: each argument with its dtype, shape and host values
 * (floats already rounded to their dtype, so an f32 tensor on the reference
 * holds exactly what the backend's holds), and how the contract treats it,
 * which tells the broken-call properties what a change breaks.
 */

/**
 * The dtype rule of a tensor argument: `anchor` sets the call's float dtype;
 * `same` must equal it; `weight` equals it or is f32; `f32` only; `float`
 * any float dtype; `index` i32 or i64; `own` only the dtype it has (a pool
 * whose partner pool, or whose scales, its dtype must agree with).
 */
export type DTypeRole = 'anchor' | 'same' | 'weight' | 'f32' | 'float' | 'index' | 'own';

export interface TensorSpec {
  readonly kind: 'tensor';
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly values: ArrayLike<number>;
  readonly role: DTypeRole;
  /** Axes a change of which binds a new dim instead of breaking the call (P of a cache, hidden at creation). */
  readonly freeAxes?: readonly number[];
  /** Removing it may leave a valid call. */
  readonly optional?: true;
  /** A caller-owned output or pool: byte-identical after a rejected call. */
  readonly watched?: true;
  /** `[T]`, `[T, 1]` and `[1, T]` all mean T entries (a materializer's positions). */
  readonly flattenable?: true;
  /** Other shapes the contract takes for it (a scale's `[1]` or `[H]`): changing an axis to one of them breaks nothing. */
  readonly alsoValid?: readonly (readonly number[])[];
  /** The very tensor given for that argument (copySlots in place: kDst is kSrc). */
  readonly sameAs?: string;
}

/**
 * A scalar argument: `dim` (bound to tensor shapes: any other value breaks
 * the call), `rotary`, `hint` (maxPositionHint), `base` (ropeBase), `eps`
 * (a number), `style`, `flag` (a boolean), `positive` (a number above 0:
 * scale, logitSoftcap), `window` (a positive integer: slidingWindow) and
 * `layout` (a pool layout).
 */
export interface ParamSpec {
  readonly kind: 'dim' | 'rotary' | 'hint' | 'base' | 'eps' | 'style' | 'flag' | 'positive' | 'window' | 'layout';
  readonly value: number | string | boolean;
  readonly optional?: true;
}

export type ArgSpec = TensorSpec | ParamSpec;

export interface CallSpec {
  readonly args: Readonly<Record<string, ArgSpec>>;
  /** The float dtype `same` and `weight` arguments compare with (kvWeight's, for a materializer's calls). */
  readonly anchorDType: FloatDType;
  /** Head dim, for rotary dims past it. */
  readonly headDim: number;
}

export function isTensorSpec(a: ArgSpec): a is TensorSpec {
  return a.kind === 'tensor';
}

function floats(dtype: FloatDType, shape: readonly number[], values: ArrayLike<number>, role: DTypeRole, extra: Partial<TensorSpec> = {}): TensorSpec {
  return { kind: 'tensor', dtype, shape, values: roundToDType(values, dtype), role, ...extra };
}

function ints(dtype: IndexDType, shape: readonly number[], values: readonly number[]): TensorSpec {
  return { kind: 'tensor', dtype, shape, values, role: 'index' };
}

const dim = (value: number): ParamSpec => ({ kind: 'dim', value });
const style = (value: string | undefined): Record<string, ParamSpec> => (value === undefined ? {} : { ropeStyle: { kind: 'style', value, optional: true } });

/** The RoPE base the fused op's caches are built from. */
const CACHE_BASE = 10000;

export function fusedSpec(c: FusedConfig): CallSpec {
  const { dtype, T, L, H, D, R, P } = c;
  const rng = new Rng(c.dataSeed);
  const outShape = [L, T, H, D];
  const n = numel(outShape);
  return {
    anchorDType: dtype,
    headDim: D,
    args: {
      numKvHeads: dim(H),
      headDim: dim(D),
      rotaryDim: { kind: 'rotary', value: R },
      ...style(c.ropeStyle),
      kv: floats(dtype, [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D), 'anchor'),
      kNormWeight: floats(c.weightDType === 'f32' ? 'f32' : dtype, [L, D], randomPositive(rng, L * D), 'weight'),
      eps: floats('f32', [L], epsPerLayer(L), 'f32'),
      cosSinCache: floats(c.cacheDType === 'f32' ? 'f32' : dtype, [P, R], buildCosSinCache(P, R, CACHE_BASE), 'float', { freeAxes: [0] }),
      positions: ints(c.positionDType, [T], c.positions),
      ...(c.outputs === 'given'
        ? {
            kOut: floats(dtype, outShape, randomValues(rng, n), 'same', { optional: true, watched: true }),
            vOut: floats(dtype, outShape, randomValues(rng, n), 'same', { optional: true, watched: true }),
          }
        : {}),
    },
  };
}

export function ropePoolSpec(c: RopePoolConfig): CallSpec {
  const { dtype, N, Hq, H, D, S } = c;
  const rng = new Rng(c.dataSeed);
  return {
    anchorDType: dtype,
    headDim: D,
    args: {
      numKvHeads: dim(H),
      numQoHeads: dim(Hq),
      headDim: dim(D),
      ...(c.R === undefined ? {} : { rotaryDim: { kind: 'rotary', value: c.R, optional: true } }),
      ...style(c.ropeStyle),
      ropeBase: { kind: 'base', value: c.ropeBase },
      q: floats(dtype, [N, Hq, D], randomValues(rng, N * Hq * D), 'anchor'),
      k: floats(dtype, [N, H, D], randomValues(rng, N * H * D), 'same'),
      v: floats(dtype, [N, H, D], randomValues(rng, N * H * D), 'same'),
      positions: ints(c.positionDType, [N], c.positions),
      slots: ints(c.slotDType, [N], c.slots),
      kPool: floats(dtype, [S, H, D], randomValues(rng, S * H * D), 'same', { watched: true }),
      vPool: floats(dtype, [S, H, D], randomValues(rng, S * H * D), 'same', { watched: true }),
    },
  };
}

/** Each value as a pool of `dtype` holds it: rounded once to the float dtype, or to the nearest fp8 code (decoded, saturated). */
export function roundToPool(values: ArrayLike<number>, dtype: PoolDType): Float32Array {
  if (!isFp8(dtype)) return roundToDType(values, dtype);
  return Float32Array.from(values, (v) => decodeFp8(dtype, encodeFp8(dtype, Math.fround(v))));
}

function pool(dtype: PoolDType, shape: readonly number[], values: ArrayLike<number>, extra: Partial<TensorSpec> = {}): TensorSpec {
  return { kind: 'tensor', dtype, shape, values: roundToPool(values, dtype), role: 'own', watched: true, ...extra };
}

/** A pool's shape in its layout: `[S, H, D]`, or `[S / pageSize, H, pageSize, D]`. */
export function poolShape(layout: PoolLayout | undefined, slots: number, pageSize: number, H: number, D: number): number[] {
  return layout === 'HND' ? [slots / pageSize, H, pageSize, D] : [slots, H, D];
}

/** A layout argument where the call gives one; omitting an explicit NHD leaves the call valid. */
function layoutArg(name: string, layout: PoolLayout | undefined): Record<string, ParamSpec> {
  return layout === undefined ? {} : { [name]: { kind: 'layout', value: layout, ...(layout === 'NHD' ? { optional: true as const } : {}) } };
}

function optionalParam(name: string, kind: ParamSpec['kind'], value: number | boolean | undefined): Record<string, ParamSpec> {
  return value === undefined ? {} : { [name]: { kind, value, optional: true } };
}

/** Per-tensor `[1]` or per-head `[H]` f32 scales of an fp8 pool. */
function scaleSpec(H: number, values: ArrayLike<number>): TensorSpec {
  return floats('f32', [values.length], values, 'f32', { alsoValid: [[1], [H]] });
}

/** Prefix sums of the lengths: `[0, n0, n0 + n1, ...]`. */
export function offsetsOf(lengths: readonly number[]): number[] {
  const out = [0];
  for (const n of lengths) out.push(out.at(-1)! + n);
  return out;
}

export function attentionSpec(c: AttentionConfig): CallSpec {
  const { dtype, Hq, H, D, S } = c;
  const rng = new Rng(c.dataSeed);
  const qIndptr = offsetsOf(c.requests.map(([q]) => q));
  const kvIndptr = offsetsOf(c.requests.map(([, kv]) => kv));
  const N = qIndptr.at(-1)!;
  const shape = poolShape(c.layout, S, c.pageSize, H, D);
  const groups = c.perHeadScales ? H : 1;
  return {
    anchorDType: dtype,
    headDim: D,
    args: {
      numKvHeads: dim(H),
      numQoHeads: dim(Hq),
      headDim: dim(D),
      ...layoutArg('layout', c.layout),
      q: floats(dtype, [N, Hq, D], randomValues(rng, N * Hq * D, 0.125 * c.qMagnitude, c.qMagnitude), 'anchor'),
      kPool: pool(c.poolDType, shape, randomValues(rng, S * H * D)),
      vPool: pool(c.poolDType, shape, randomValues(rng, S * H * D)),
      ...(isFp8(c.poolDType) ? { kScale: scaleSpec(H, randomPositive(rng, groups, 0.25, 2)), vScale: scaleSpec(H, randomPositive(rng, groups, 0.25, 2)) } : {}),
      qIndptr: ints(c.qIndptrDType, [qIndptr.length], qIndptr),
      kvIndptr: ints(c.kvIndptrDType, [kvIndptr.length], kvIndptr),
      kvSlots: ints(c.slotDType, [c.kvSlots.length], c.kvSlots),
      ...optionalParam('causal', 'flag', c.causal),
      ...optionalParam('scale', 'positive', c.scale),
      ...optionalParam('slidingWindow', 'window', c.slidingWindow),
      ...optionalParam('logitSoftcap', 'positive', c.logitSoftcap),
      ...(c.out === 'given' ? { out: floats(dtype, [N, Hq, D], patternValues(N * Hq * D), 'same', { optional: true, watched: true }) } : {}),
    },
  };
}

/** The destination side of a copy config: the source's own pools in place. */
export function copyDestination(c: CopyConfig): CopySide {
  return c.dst === 'in place' ? c.src : c.dst;
}

export function copySpec(c: CopyConfig): CallSpec {
  const { H, D } = c;
  const rng = new Rng(c.dataSeed);
  const src = c.src;
  const dst = copyDestination(c);
  const scales = (side: CopySide) => [0, 1].map(() => randomPositive(rng, side.perHeadScales ? H : 1, 0.02, 0.5));
  const side = (which: 'Src' | 'Dst', s: CopySide, values: (n: number) => Float32Array, scaleValues: Float32Array[] | undefined): Record<string, ArgSpec> => {
    const shape = poolShape(s.layout, s.slots, s.pageSize, H, D);
    const n = s.slots * H * D;
    return {
      ...layoutArg(`${which.toLowerCase()}Layout`, s.layout),
      [`k${which}`]: pool(s.dtype, shape, values(n)),
      [`v${which}`]: pool(s.dtype, shape, values(n)),
      ...(scaleValues ? { [`k${which}Scale`]: scaleSpec(H, scaleValues[0]!), [`v${which}Scale`]: scaleSpec(H, scaleValues[1]!) } : {}),
    };
  };
  const srcScales = isFp8(src.dtype) ? scales(src) : undefined;
  // Source rows large enough to saturate an fp8 destination of a small scale.
  const source = side('Src', src, (n) => randomValues(rng, n, 0.01, 20), srcScales);
  let destination: Record<string, ArgSpec>;
  if (c.dst === 'in place') {
    // The source's own tensors under the destination's names.
    destination = Object.fromEntries(Object.entries(source).map(([name, arg]) => [name.replace('Src', 'Dst').replace('src', 'dst'), isTensorSpec(arg) ? { ...arg, sameAs: name } : arg]));
  } else {
    const dstScales = isFp8(dst.dtype) ? (c.sameScales && srcScales ? srcScales : scales(dst)) : undefined;
    destination = side('Dst', dst, (n) => patternValues(n).map((x) => x / 64), dstScales);
  }
  return {
    anchorDType: 'f32',
    headDim: D,
    args: {
      ...source,
      ...destination,
      fromSlots: ints(c.fromDType, [c.pairs.length], c.pairs.map(([f]) => f)),
      toSlots: ints(c.toDType, [c.pairs.length], c.pairs.map(([, t]) => t)),
    },
  };
}

/** The 2^-17 eps number is exact in f32, so a reference given the tensor form means the same eps. */
export const EPS_NUMBER = 2 ** -17;

export function createSpec(c: MaterializerConfig): CallSpec {
  const { dtype, L, H, D, hidden } = c;
  const R = c.R ?? D;
  const O = 2 * H * D;
  const rng = new Rng(c.dataSeed);
  const rope: Record<string, ArgSpec> =
    c.rope.kind === 'cosSinCache'
      ? { cosSinCache: floats('f32', [c.rope.P, R], buildCosSinCache(c.rope.P, R, CACHE_BASE), 'float', { freeAxes: [0] }) }
      : { ropeBase: { kind: 'base', value: c.rope.ropeBase }, ...(c.rope.maxPositionHint === undefined ? {} : { maxPositionHint: { kind: 'hint', value: c.rope.maxPositionHint, optional: true } }) };
  return {
    anchorDType: dtype,
    headDim: D,
    args: {
      numKvHeads: dim(H),
      headDim: dim(D),
      ...(c.R === undefined ? {} : { rotaryDim: { kind: 'rotary', value: c.R, optional: true } }),
      ...style(c.ropeStyle),
      // Scaled by 1/sqrt(hidden): projections stay near 1 whatever the width.
      kvWeight: floats(dtype, [L, O, hidden], randomValues(rng, L * O * hidden, 0.125 / Math.sqrt(hidden), 1 / Math.sqrt(hidden)), 'anchor', { freeAxes: [2] }),
      kNormWeight: floats(c.weightDType === 'f32' ? 'f32' : dtype, [L, D], randomPositive(rng, L * D), 'weight'),
      eps: c.eps === 'tensor' ? floats('f32', [L], epsPerLayer(L), 'f32') : { kind: 'eps', value: EPS_NUMBER },
      ...rope,
    },
  };
}

function positionsShape(call: MaterializerCall): number[] {
  return call.positionsShape === '[T]' ? [call.T] : call.positionsShape === '[T, 1]' ? [call.T, 1] : [1, call.T];
}

/** Call `index` of a materializer config; `into` adds the pools (random contents) and the slots. */
export function materializerCallSpec(c: MaterializerConfig, index: number): CallSpec {
  const call = c.calls[index]!;
  const { dtype, L, H, D, hidden } = c;
  const { T, S } = call;
  const rng = new Rng((c.dataSeed + 7919 * (index + 1)) | 0);
  const poolShape = [L, S, H, D];
  return {
    anchorDType: dtype,
    headDim: D,
    args: {
      ctxHidden: floats(dtype, [T, hidden], randomValues(rng, T * hidden), 'same'),
      positions: { ...ints(call.positionDType, positionsShape(call), call.positions), flattenable: true },
      ...(call.entry === 'materializeInto'
        ? {
            kPool: floats(dtype, poolShape, randomValues(rng, numel(poolShape)), 'same', { watched: true }),
            vPool: floats(dtype, poolShape, randomValues(rng, numel(poolShape)), 'same', { watched: true }),
            slots: ints(call.slotDType, [T], call.slots),
          }
        : {}),
    },
  };
}

/** A tensor argument on `scope`'s backend; `asF32` makes float tensors f32 (the reference's view of the same values). */
export function makeTensor(scope: Scope, spec: TensorSpec, asF32 = false): Tensor {
  if (spec.dtype === 'i32' || spec.dtype === 'i64') return scope.index(spec.dtype, spec.shape, Array.from(spec.values));
  return scope.float(asF32 ? 'f32' : (spec.dtype as PoolDType), spec.shape, spec.values);
}

/** The arguments object of a spec, built on `scope`; `tensors` receives each tensor made, by name. */
export function buildArgs(scope: Scope, spec: CallSpec, asF32 = false, tensors?: Map<string, Tensor>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, arg] of Object.entries(spec.args)) {
    if (isTensorSpec(arg)) {
      const t = arg.sameAs !== undefined ? (out[arg.sameAs] as Tensor) : makeTensor(scope, arg, asF32);
      tensors?.set(name, t);
      out[name] = t;
    } else {
      out[name] = arg.value;
    }
  }
  return out;
}
