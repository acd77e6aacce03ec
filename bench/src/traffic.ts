import type { MaterializeShape, NormRopeShape, RopePoolShape } from './shapes.js';

/** Bytes an op must move at least, counted once each (the ratio's numerator). */
const BF16 = 2;
const F32 = 4;
const INDEX = 4;

/** kv read once, kOut and vOut written once, plus positions, weights, eps and the cos/sin rows touched. */
export function normRopeBytes(s: NormRopeShape, cacheRows: number): number {
  const kv = s.T * s.L * 2 * s.H * s.D * BF16;
  const rows = Math.min(s.T, cacheRows) * s.R * F32;
  return 2 * kv + s.T * INDEX + s.L * s.D * BF16 + s.L * F32 + rows;
}

/** q, k read and rotated copies written; v read; K and V rows written to the pools; positions and slots. */
export function ropePoolBytes(s: RopePoolShape): number {
  const q = s.N * s.Hq * s.D * BF16;
  const k = s.N * s.H * s.D * BF16;
  return 2 * q + 2 * k + k + 2 * k + 2 * s.N * INDEX;
}

export function projectionFlops(s: MaterializeShape): number {
  return 2 * s.T * s.hidden * s.L * 2 * s.H * s.D;
}
