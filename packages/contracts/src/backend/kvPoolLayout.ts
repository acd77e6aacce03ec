/**
 * Where a slot's rows sit in a KV pool, and what an fp8 pool stores: the
 * rules of the pool layouts (ops/kvPools.ts), kept once for every backend's
 * host code and for the conformance oracle.
 */
import type { Fp8DType } from '../tensor.js';
import { encodeFp8 } from './fp8.js';

export type PoolLayoutName = 'NHD' | 'HND';

/** A pool's geometry: NHD `[S, H, D]`, or HND `[pages, H, pageSize, D]` with `S = pages * pageSize` (per layer, after any `L`). */
export interface PoolGeometry {
  readonly layout: PoolLayoutName;
  readonly slots: number;
  readonly heads: number;
  readonly headDim: number;
  /** Rows per page: `S` itself for NHD, whose one "page" is the whole pool. */
  readonly pageSize: number;
}

/** The geometry a validated call bound (`dims.S`, `H`, `D`, and `pageSize` for HND). */
export function poolGeometry(layout: PoolLayoutName, dims: { readonly S: number; readonly H: number; readonly D: number; readonly pageSize?: number }): PoolGeometry {
  return { layout, slots: dims.S, heads: dims.H, headDim: dims.D, pageSize: layout === 'HND' ? dims.pageSize! : dims.S };
}

/** The first element of head `head` of slot `slot` in layer `layer`: NHD `((l*S + s)*H + h)*D`; HND page `s / pageSize`, row `s % pageSize`. */
export function poolRowStart(g: PoolGeometry, layer: number, slot: number, head: number): number {
  if (g.layout === 'NHD') return ((layer * g.slots + slot) * g.heads + head) * g.headDim;
  const page = Math.floor(slot / g.pageSize);
  const pages = g.slots / g.pageSize;
  return (((layer * pages + page) * g.heads + head) * g.pageSize + (slot - page * g.pageSize)) * g.headDim;
}

/**
 * What an fp8 pool stores for a value `x` (already in the model dtype) and its
 * scale: the quotient in f32 (IEEE division, correctly rounded), then rounded
 * once to fp8, ties to even, saturating. Every backend computes exactly this.
 */
export function quantizeToFp8(dtype: Fp8DType, x: number, scale: number): number {
  return encodeFp8(dtype, Math.fround(x / scale));
}

/** The value a dequantising read gives for a stored fp8 value and its scale: their product in f32. */
export function dequantizedValue(decoded: number, scale: number): number {
  return Math.fround(decoded * scale);
}
