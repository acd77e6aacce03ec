import type { FloatDType } from '@kvkit/contracts';

/** Every `extern "C" __global__` entry point the runtime launches (a test checks each one is in the built fatbin). */
export const KERNEL_NAMES = [
  ...(['f32', 'f16', 'bf16'] as const).flatMap((d) => [`fused_norm_rope_${d}_nv1`, `fused_norm_rope_${d}_nv2`, `fused_norm_rope_${d}_any`]),
  ...(['f32', 'f16', 'bf16'] as const).flatMap((d) => [`rope_pool_${d}_nv1`, `rope_pool_${d}_nv2`, `rope_pool_${d}_any`]),
  'claim_slots',
  'gemm_tensorcore_f16',
  'gemm_tensorcore_bf16',
  'gemm_simt_f32',
  'spin_stream',
  'copy_vectors',
  'fill_random_f32',
  'fill_random_f16',
  'fill_random_bf16',
] as const;

export type KernelName = (typeof KERNEL_NAMES)[number];

/** How a row kernel walks its rows: vectors per lane (fast path) or element by element. */
export type RowPath = 'nv1' | 'nv2' | 'any';

export function fusedKernel(dtype: FloatDType, path: RowPath): KernelName {
  return `fused_norm_rope_${dtype}_${path}`;
}

export function ropePoolKernel(dtype: FloatDType, path: RowPath): KernelName {
  return `rope_pool_${dtype}_${path}`;
}
