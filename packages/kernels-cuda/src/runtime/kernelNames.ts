import type { FloatDType } from '@kvkit/contracts';
import type { KernelName, LAUNCHES } from '../generated/kernels.js';

export type { KernelName, ParamsOf } from '../generated/kernels.js';

/** How a row kernel walks its rows: vectors per lane (fast path) or element by element (its declared launches). */
export type RowPath = keyof (typeof LAUNCHES)['fusedNormRope'] & keyof (typeof LAUNCHES)['ropePool'];

// The names are checked against the generated entry points: a combination that is not declared does not compile.
export function fusedKernel(dtype: FloatDType, path: RowPath, pairedLanes: boolean): Extract<KernelName, `fused_norm_rope_${string}`> {
  return path === 'nv1' && pairedLanes ? `fused_norm_rope_${dtype}_nv1_paired` : `fused_norm_rope_${dtype}_${path}`;
}

/** The token tiles (nv1) come in builds for pools of the model dtype and for fp8 pools too, each with lanes of one vector or of pairs. */
export function ropePoolKernel(dtype: FloatDType, path: RowPath, fp8Pools: boolean, pairedLanes: boolean): Extract<KernelName, `rope_pool_${string}`> {
  if (path !== 'nv1') return `rope_pool_${dtype}_${path}`;
  if (pairedLanes) return fp8Pools ? `rope_pool_${dtype}_nv1_paired_fp8` : `rope_pool_${dtype}_nv1_paired`;
  return fp8Pools ? `rope_pool_${dtype}_nv1_fp8` : `rope_pool_${dtype}_nv1`;
}
