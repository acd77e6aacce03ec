import type { FloatDType } from '@kvkit/contracts';
import type { KernelName, LAUNCHES } from '../generated/kernels.js';

export type { KernelName, ParamsOf } from '../generated/kernels.js';

/** How a row kernel walks its rows: vectors per lane (fast path) or element by element (its declared launches). */
export type RowPath = keyof (typeof LAUNCHES)['fusedNormRope'] & keyof (typeof LAUNCHES)['ropePool'];

// The names are checked against the generated entry points: a combination that is not declared does not compile.
export function fusedKernel(dtype: FloatDType, path: RowPath): Extract<KernelName, `fused_norm_rope_${string}`> {
  return `fused_norm_rope_${dtype}_${path}`;
}

/** The token tiles (nv1) come in two builds: for pools of the model dtype, and for fp8 pools too. */
export function ropePoolKernel(dtype: FloatDType, path: RowPath, fp8Pools: boolean): Extract<KernelName, `rope_pool_${string}`> {
  return path === 'nv1' && fp8Pools ? `rope_pool_${dtype}_nv1_fp8` : `rope_pool_${dtype}_${path}`;
}
