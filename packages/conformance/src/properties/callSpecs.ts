import type { DType, FloatDType, IndexDType, Tensor } from '@kvkit/contracts';
import { numel } from '@kvkit/contracts';
import { buildCosSinCache, epsPerLayer, randomPositive, randomValues, Rng, roundToDType } from '../data.js';
import type { Scope } from '../tensors.js';
import type { FusedConfig, MaterializerCall, MaterializerConfig, RopePoolConfig } from './configs.js';

/**
 * One op call as data: each argument with its dtype, shape and host values
 * (floats already rounded to their dtype, so an f32 tensor on the reference
 * holds exactly what the backend's holds), and how the contract treats it,
 * which tells the broken-call properties what a change breaks.
 */

/**
 * The dtype rule of a tensor argument: `anchor` sets the call's float dtype;
 * `same` must equal it; `weight` equals it or is f32; `f32` only; `float`
 * any float dtype; `index` i32 or i64.
 */
export type DTypeRole = 'anchor' | 'same' | 'weight' | 'f32' | 'float' | 'index';

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
}

/**
 * A scalar argument: `dim` (bound to tensor shapes: any other value breaks
 * the call), `rotary`, `hint` (maxPositionHint), `base` (ropeBase), `eps`
 * (a number) and `style`.
 */
export interface ParamSpec {
  readonly kind: 'dim' | 'rotary' | 'hint' | 'base' | 'eps' | 'style';
  readonly value: number | string;
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
  return scope.float(asF32 ? 'f32' : (spec.dtype as FloatDType), spec.shape, spec.values);
}

/** The arguments object of a spec, built on `scope`; `tensors` receives each tensor made, by name. */
export function buildArgs(scope: Scope, spec: CallSpec, asF32 = false, tensors?: Map<string, Tensor>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, arg] of Object.entries(spec.args)) {
    if (isTensorSpec(arg)) {
      const t = makeTensor(scope, arg, asF32);
      tensors?.set(name, t);
      out[name] = t;
    } else {
      out[name] = arg.value;
    }
  }
  return out;
}
