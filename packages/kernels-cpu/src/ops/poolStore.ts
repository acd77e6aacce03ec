import type { DType, Fp8DType } from '@kvkit/contracts';
import { decodeFp8, dequantizedValue, poolGeometry, poolRowStart, quantizeToFp8 } from '@kvkit/contracts/backend';
import type { OwnedTensor, PoolGeometry, PoolLayoutName } from '@kvkit/contracts/backend';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import type { Storage } from '../runtime/cpuTensor.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { FloatAccess } from '../runtime/floatAccess.js';
import { scatterOrder } from '../runtime/scatterOrder.js';
import type { SlotScatter } from '../runtime/scatterOrder.js';

/** One pool as a call names it: its storage, dtype, geometry and (fp8) the scale of each head. */
export interface PoolTarget {
  readonly data: Storage;
  readonly dtype: DType;
  readonly geometry: PoolGeometry;
  /** Per head; undefined for a pool in the model dtype. */
  readonly scales: Float64Array | undefined;
}

/** A pool argument of a validated call: the layout and dims it bound, the scale it came with. */
export function poolTarget(
  backend: CpuKernels,
  pool: OwnedTensor,
  scale: OwnedTensor | undefined,
  layout: PoolLayoutName,
  dims: { readonly S: number; readonly H: number; readonly D: number; readonly pageSize?: number },
): PoolTarget {
  const geometry = poolGeometry(layout, dims);
  let scales: Float64Array | undefined;
  if (scale) {
    const given = backend.own(scale).data as Float32Array;
    scales = Float64Array.from({ length: dims.H }, (_, h) => given[given.length === 1 ? 0 : h]!);
  }
  return { data: backend.own(pool).data, dtype: pool.dtype, geometry, scales };
}

/**
 * Scatters head rows `[T, H, D]` of the model dtype (`src`, one layer's) into
 * layer `layer` of a pool at the slots, in the order the contract's duplicate
 * rule needs: the bits as they are for a pool of the same dtype, fp8 codes of
 * value / scale for an fp8 pool.
 */
export function storePoolRows(target: PoolTarget, layer: number, src: FloatAccess, srcStart: number, slots: SlotScatter, tokens: number): void {
  const { geometry: g, scales } = target;
  const { heads: H, headDim: D } = g;
  const fp8 = scales !== undefined;
  const bits = src.bits;
  const dst = fp8 ? undefined : floatAccess(target.dtype, target.data).bits;
  const codes = target.data as Uint8Array;
  for (const t of scatterOrder(tokens, slots.duplicates)) {
    const slot = indexAt(slots.values, t);
    if (slot < 0) continue;
    for (let h = 0; h < H; h++) {
      const from = srcStart + (t * H + h) * D;
      const to = poolRowStart(g, layer, slot, h);
      if (dst) for (let i = 0; i < D; i++) dst[to + i] = bits[from + i]!;
      else for (let i = 0; i < D; i++) codes[to + i] = quantizeToFp8(target.dtype as Fp8DType, src.get(from + i), scales![h]!);
    }
  }
}

/** dequantizeKv: rows `[N, H, D]` of the pool at the slots, decoded and scaled in f32, rounded once to the rows' dtype. */
export function readPoolRows(target: PoolTarget, slots: Storage, rows: FloatAccess): void {
  const { geometry: g, scales } = target;
  const { heads: H, headDim: D } = g;
  const pool = scales ? undefined : floatAccess(target.dtype, target.data);
  const codes = target.data as Uint8Array;
  for (let n = 0; n < slots.length; n++) {
    const slot = indexAt(slots, n);
    if (slot < 0) continue;
    for (let h = 0; h < H; h++) {
      const from = poolRowStart(g, 0, slot, h);
      const to = (n * H + h) * D;
      for (let i = 0; i < D; i++) {
        rows.set(to + i, pool ? pool.get(from + i) : dequantizedValue(decodeFp8(target.dtype as Fp8DType, codes[from + i]!), scales![h]!));
      }
    }
  }
}

/** Reads head rows of a pool as values in f64: the stored value for a float pool, decode(code) * scale in f32 for fp8 (as dequantizeKv gives it). */
export function poolRowReader(target: PoolTarget): (slot: number, head: number, dst: Float64Array, at: number) => void {
  const { geometry: g, scales } = target;
  const D = g.headDim;
  if (scales === undefined) {
    const pool = floatAccess(target.dtype, target.data);
    return (slot, head, dst, at) => {
      const from = poolRowStart(g, 0, slot, head);
      for (let i = 0; i < D; i++) dst[at + i] = pool.get(from + i);
    };
  }
  const codes = target.data as Uint8Array;
  const dtype = target.dtype as Fp8DType;
  return (slot, head, dst, at) => {
    const from = poolRowStart(g, 0, slot, head);
    const scale = scales[head]!;
    for (let i = 0; i < D; i++) dst[at + i] = dequantizedValue(decodeFp8(dtype, codes[from + i]!), scale);
  };
}
