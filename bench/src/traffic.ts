import type { FloatDType } from '@kvkit/contracts';
import type { CopySlotsShape, MaterializeShape, MlaShape, NormRopeShape, PagedShape, RopePoolShape } from './shapes.js';

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

/** Bytes of one pool element: fp8 pools store one byte, the others their dtype. */
const poolElementBytes = (dtype: FloatDType, poolDtype?: string) => (poolDtype ? 1 : ELEMENT_BYTES[dtype]);

/** What a row's variant changes in its traffic: the pools' dtype, the Q/K-norm weights, mRoPE's three position streams. */
export interface TrafficVariant {
  readonly qkNorm?: boolean;
  readonly poolDtype?: string;
  readonly rope?: { readonly mropeSection?: readonly number[] };
}

/** q, k read and rotated copies written; v read; K and V rows written to the pools; positions and slots. */
export function ropePoolBytes(s: RopePoolShape, dtype: FloatDType = 'bf16', variant: TrafficVariant = {}): number {
  const es = ELEMENT_BYTES[dtype];
  const q = s.N * s.Hq * s.D * es;
  const k = s.N * s.H * s.D * es;
  // A pool's rows at their stored size (fp8: one byte), plus the per-head scale an fp8 pool reads.
  const pool = s.N * s.H * s.D * poolElementBytes(dtype, variant.poolDtype) + (variant.poolDtype ? s.H * F32 : 0);
  // mRoPE reads a position per stream (temporal, height, width) for each token.
  const positions = s.N * INDEX * (variant.rope?.mropeSection ? 3 : 1);
  // The Q/K-norm reads its two [D] weights; the rows it norms are the ones already counted.
  return 2 * q + 2 * k + k + 2 * pool + positions + s.N * INDEX + (variant.qkNorm ? 2 * s.D * es : 0);
}

/** A dequantizeKv row: N rows of one pool read at their stored size (with an fp8 pool's per-head scale), written as rows of `dtype`, and the slots. */
export function dequantizeKvBytes(s: RopePoolShape, dtype: FloatDType = 'bf16', variant: { readonly poolDtype?: string } = {}): number {
  const rows = s.N * s.H * s.D;
  return rows * poolElementBytes(dtype, variant.poolDtype) + (variant.poolDtype ? s.H * F32 : 0) + rows * ELEMENT_BYTES[dtype] + s.N * INDEX;
}

/**
 * What materializeInto must move at least, bf16 in: the hidden states and the
 * projection weights read once, every layer's K and V rows written to the
 * pools at their stored size (with fp8's per-head scales), the norm weights,
 * eps, positions, slots and the cos/sin rows touched. The projection's own
 * output is not counted: a kernel that fused the GEMM would never store it.
 */
export function materializeIntoBytes(s: MaterializeShape, cacheRows: number, variant: { readonly poolDtype?: string } = {}): number {
  const es = ELEMENT_BYTES.bf16;
  const hidden = s.T * s.hidden * es;
  const weight = s.L * 2 * s.H * s.D * s.hidden * es;
  const pools = 2 * (s.L * s.T * s.H * s.D * poolElementBytes('bf16', variant.poolDtype) + (variant.poolDtype ? s.H * F32 : 0));
  const rows = Math.min(s.T, cacheRows) * s.R * F32;
  return hidden + weight + pools + s.L * s.D * es + s.L * F32 + 2 * s.T * INDEX + rows;
}

export function projectionFlops(s: MaterializeShape): number {
  return 2 * s.T * s.hidden * s.L * 2 * s.H * s.D;
}

/**
 * A pagedAttention row: q read and out written in q's dtype, the lse written (f32), every request's cached K and V
 * rows read once at their stored size (with an fp8 pool's per-head scales), kvSlots and both indptrs.
 */
export function pagedAttentionBytes(s: PagedShape, qLen: number, dtype: FloatDType = 'bf16', variant: { readonly poolDtype?: string } = {}): number {
  const N = s.B * qLen;
  const C = s.B * s.kvLen;
  const q = N * s.Hq * s.D * ELEMENT_BYTES[dtype];
  const kv = 2 * (C * s.H * s.D * poolElementBytes(dtype, variant.poolDtype) + (variant.poolDtype ? s.H * F32 : 0));
  return 2 * q + N * s.Hq * F32 + kv + C * INDEX + 2 * (s.B + 1) * INDEX;
}

/** A copySlots row: M pairs' K and V rows read at the source's stored size and written at the destination's (with an fp8 destination's scales), and both slot lists. */
export function copySlotsBytes(s: CopySlotsShape, dtype: FloatDType = 'bf16', variant: { readonly dstPoolDtype?: string } = {}): number {
  const rows = 2 * s.M * s.H * s.D;
  return rows * ELEMENT_BYTES[dtype] + rows * poolElementBytes(dtype, variant.dstPoolDtype) + (variant.dstPoolDtype ? 2 * s.H * F32 : 0) + 2 * s.M * INDEX;
}

/** An mlaPoolFused row: the latent rows read and written to the pool at its stored size (with an fp8 pool's scale), q read and qRot written (unless left out), the norm weight, positions and slots. */
export function mlaPoolBytes(s: MlaShape, dtype: FloatDType = 'bf16', variant: { readonly poolDtype?: string; readonly withoutQuery?: boolean } = {}): number {
  const es = ELEMENT_BYTES[dtype];
  const rows = s.N * (s.C + s.R);
  const q = variant.withoutQuery ? 0 : s.N * s.Hq * s.Dq * es;
  return rows * es + rows * poolElementBytes(dtype, variant.poolDtype) + (variant.poolDtype ? F32 : 0) + 2 * q + s.C * es + 2 * s.N * INDEX;
}
