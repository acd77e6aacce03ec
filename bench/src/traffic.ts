import type { FloatDType } from '@kvkit/contracts';
import type { MaterializeShape, NormRopeShape, RopePoolShape } from './shapes.js';

/** Bytes an op must move at least, counted once each at their stored sizes (the ratio's numerator). */
export const ELEMENT_BYTES: Readonly<Record<FloatDType, number>> = { f32: 4, f16: 2, bf16: 2 };
const F32 = 4;
const INDEX = 4;

/** kv read once, kOut and vOut written once, plus positions, weights, eps and the cos/sin rows touched. */
export function normRopeBytes(s: NormRopeShape, cacheRows: number, dtype: FloatDType = 'bf16'): number {
  const es = ELEMENT_BYTES[dtype];
  const kv = s.T * s.L * 2 * s.H * s.D * es;
  const rows = Math.min(s.T, cacheRows) * s.R * F32;
  return 2 * kv + s.T * INDEX + s.L * s.D * es + s.L * F32 + rows;
}

/** q, k read and rotated copies written; v read; K and V rows written to the pools; positions and slots. */
export function ropePoolBytes(s: RopePoolShape, dtype: FloatDType = 'bf16', variant: { qkNorm?: boolean; poolDtype?: string } = {}): number {
  const es = ELEMENT_BYTES[dtype];
  const q = s.N * s.Hq * s.D * es;
  const k = s.N * s.H * s.D * es;
  // A pool's rows at their stored size (fp8: one byte), plus the per-head scale an fp8 pool reads.
  const pool = variant.poolDtype ? s.N * s.H * s.D + s.H * F32 : k;
  // The Q/K-norm reads its two [D] weights; the rows it norms are the ones already counted.
  return 2 * q + 2 * k + k + 2 * pool + 2 * s.N * INDEX + (variant.qkNorm ? 2 * s.D * es : 0);
}

export function projectionFlops(s: MaterializeShape): number {
  return 2 * s.T * s.hidden * s.L * 2 * s.H * s.D;
}
