import type { Fp8DType } from '@kvkit/contracts';
import { decodeFp8, dequantizedValue, poolRowStart, quantizeToFp8 } from '@kvkit/contracts/backend';
import type { CopySlotsChecked, OwnedTensor, PoolLayoutName } from '@kvkit/contracts/backend';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { allocateStorage } from '../runtime/cpuTensor.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import { scatterOrder } from '../runtime/scatterOrder.js';
import { poolTarget } from './poolStore.js';
import type { PoolTarget } from './poolStore.js';

const isFp8 = (t: PoolTarget): boolean => t.scales !== undefined;

/**
 * copySlots: every source row is staged first (source and destination may be
 * the same pools), then the pairs are written in order, so of the pairs
 * naming one destination slot the last writes it. A head whose destination
 * has the source's dtype (and, for fp8, the same scale) gets the stored bits;
 * any other is decoded to its value and stored rounded once in the
 * destination's dtype (fp8: the code of value / scale).
 */
export function copySlots(backend: CpuKernels, args: CopySlotsChecked): void {
  const { M, H, D, S, dstS } = args.dims;
  if (M === 0) return;
  const source = (pool: OwnedTensor, scale: OwnedTensor | undefined) =>
    poolTarget(backend, pool, scale, args.srcLayout as PoolLayoutName, { S, H, D, pageSize: args.dims.pageSize });
  const destination = (pool: OwnedTensor, scale: OwnedTensor | undefined) =>
    poolTarget(backend, pool, scale, args.dstLayout as PoolLayoutName, { S: dstS!, H, D, pageSize: args.dims.dstPageSize });
  const from = backend.own(args.fromSlots).data;
  const to = backend.own(args.toSlots).data;
  const pairs = [
    [source(args.kSrc, args.kSrcScale), destination(args.kDst, args.kDstScale)],
    [source(args.vSrc, args.vSrcScale), destination(args.vDst, args.vDstScale)],
  ] as const;
  const row = H * D;
  const staged = pairs.map(([src]) => {
    const stage = allocateStorage(src.dtype, M * row);
    for (let m = 0; m < M; m++) {
      const slot = indexAt(from, m);
      if (slot < 0 || indexAt(to, m) < 0) continue;
      for (let h = 0; h < H; h++) {
        const at = poolRowStart(src.geometry, 0, slot, h);
        stage.set(src.data.subarray(at, at + D) as never, m * row + h * D);
      }
    }
    return stage;
  });
  pairs.forEach(([src, dst], which) => {
    const stage = staged[which]!;
    const sameBits = Array.from({ length: H }, (_, h) => src.dtype === dst.dtype && (!isFp8(src) || src.scales![h] === dst.scales![h]));
    const read = isFp8(src) ? undefined : floatAccess(src.dtype, stage);
    const write = isFp8(dst) ? undefined : floatAccess(dst.dtype, dst.data);
    for (const m of scatterOrder(M, args.duplicates.toSlots)) {
      const slot = indexAt(to, m);
      if (slot < 0 || indexAt(from, m) < 0) continue;
      for (let h = 0; h < H; h++) {
        const at = poolRowStart(dst.geometry, 0, slot, h);
        const staging = m * row + h * D;
        if (sameBits[h]) {
          dst.data.set(stage.subarray(staging, staging + D) as never, at);
          continue;
        }
        for (let i = 0; i < D; i++) {
          const value = read ? read.get(staging + i) : dequantizedValue(decodeFp8(src.dtype as Fp8DType, stage[staging + i] as number), src.scales![h]!);
          if (write) write.set(at + i, value);
          else (dst.data as Uint8Array)[at + i] = quantizeToFp8(dst.dtype as Fp8DType, value, dst.scales![h]!);
        }
      }
    }
  });
}
