import { ropeAngles, writeCosSinRows } from './backend/rope.js';
import type { RopeAngleMode } from './backend/rope.js';
import type { RopeScaling } from './generated/signatures.js';
import { ropeScalingRule } from './generated/validators.js';
import { Call } from './runtime/call.js';
import type { Backend } from './runtime/backend.js';
import { FLOAT_DTYPES } from './tensor.js';
import type { FloatDType, Tensor } from './tensor.js';

/** What `ropeCosSinCache` builds: a cos/sin cache of `positions` rows for `fusedNormRopeStacked`, from the same angles `ropeBase` gives elsewhere. */
export interface RopeCosSinCacheArgs<DT extends FloatDType> {
  /** Columns of the cache (R, even). */
  readonly rotaryDim: number;
  /** RoPE base (theta). */
  readonly ropeBase: number;
  /** Scaled RoPE, as in `ropePoolFused`; plain when omitted. */
  readonly ropeScaling?: RopeScaling;
  /** The angle convention, as in `ropePoolFused`; default 'exact'. */
  readonly angles?: RopeAngleMode;
  /** Rows of the cache (P): positions 0 .. P-1. */
  readonly positions: number;
  /** Dtype of the cache; default f32. */
  readonly dtype?: DT;
}

/**
 * A `[P, R]` cos/sin cache for `fusedNormRopeStacked` (or a materializer's
 * `cosSinCache`) with the numbers `ropePoolFused` computes from the same
 * `ropeBase`, `ropeScaling` and `angles`: row p is cos of each pair's angle at
 * p, then sin, times the magnitude, computed in f64 and rounded once.
 */
export function ropeCosSinCache<DT extends FloatDType = 'f32'>(backend: Backend, args: RopeCosSinCacheArgs<DT>): Tensor<DT, readonly [number, number]> {
  const c = new Call('ropeCosSinCache', { owner: backend, label: 'ropeCosSinCache' });
  const a = c.args(args, ['rotaryDim', 'ropeBase', 'ropeScaling', 'angles', 'positions', 'dtype'], 'KV043');
  const rotaryDim = c.int('rotaryDim', a.rotaryDim, 'KV006', { binds: 'R' })!;
  c.evenAtMost('rotaryDim', rotaryDim, 'R', 'KV007');
  const ropeBase = c.number('ropeBase', a.ropeBase, 'KV008', { above: 0 })!;
  // The rule every op that takes ropeBase validates with (generated from its declaration).
  const ropeScaling = c.tagged('ropeScaling', a.ropeScaling, ropeScalingRule) as RopeScaling | undefined;
  const angles = c.choice('angles', a.angles, ['exact', 'float32'] as const, 'exact', 'KV009');
  const rows = c.int('positions', a.positions, 'KV006', { binds: 'P' })!;
  const dtype = c.choice('dtype', a.dtype, FLOAT_DTYPES, 'f32', 'KV004') as DT;
  // f32 rows are rounded once on the store; f16 and bf16 go through f64 so the upload rounds them once too.
  const data = dtype === 'f32' ? new Float32Array(rows * rotaryDim) : new Float64Array(rows * rotaryDim);
  writeCosSinRows(data, 0, rows, ropeAngles({ ropeBase, rotaryDim, ropeScaling, angles }));
  return backend.tensor(dtype, [rows, rotaryDim] as const, data) as Tensor<DT, readonly [number, number]>;
}
