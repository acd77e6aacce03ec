import type { FloatDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { FLOAT_CODE } from '@kvkit/contracts/kernels';
import type { DequantizeKvChecked, PoolLayoutName } from '@kvkit/contracts/backend';
import { LAUNCHES } from '../generated/kernels.js';
import type { ParamFields } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { boundsOf, deviceRules } from './normRope.js';

/** An fp8 pool's scale as the kernel reads it: contiguous f32 at `ptr`, one per head or one for all. */
export interface PoolScale {
  readonly ptr: number;
  readonly perHead: boolean;
}

/** The scales `[kScale?, vScale?]` at the addresses the gather gave the present ones, in order. */
export function poolScales(scales: readonly (CudaTensor | undefined)[], gathered: readonly number[]): (PoolScale | undefined)[] {
  let next = 0;
  return scales.map((s) => (s ? { ptr: gathered[next++]!, perHead: s.shape[0]! > 1 } : undefined));
}

/** The pool fields of the rope kernels' parameter blocks (contracts/src/kernels/kvPools.ts poolWriteParams), the same in both. */
export type PoolWrite = Pick<ParamFields['RopePoolParams'] & ParamFields['FusedNormRopeParams'], 'poolHeadMajor' | 'poolPageSize' | 'poolDType' | 'kScale' | 'vScale' | 'kScalePerHead' | 'vScalePerHead'>;

/** Rows written as they are, row r of a layer at (r*H + h)*D: kRot-like outputs, and NHD pools of the model dtype. */
export const DENSE_ROWS: PoolWrite = { poolHeadMajor: 0, poolPageSize: 0, poolDType: 0, kScale: 0, vScale: 0, kScalePerHead: 0, vScalePerHead: 0 };

/**
 * How the rope kernels store into the call's pools (kv_pool.cuh): the
 * layout and page size, and for fp8 pools the code of the format and the
 * gathered scales (both present by the contract).
 */
export function poolWrite(layout: PoolLayoutName, dims: { readonly pageSize?: number }, poolDtype: PoolDType, scales: readonly (PoolScale | undefined)[]): PoolWrite {
  const [kScale, vScale] = scales;
  const hnd = layout === 'HND';
  return {
    poolHeadMajor: hnd ? 1 : 0,
    poolPageSize: hnd ? dims.pageSize! : 0,
    poolDType: poolDtype === 'fp8e4m3' ? 1 : poolDtype === 'fp8e5m2' ? 2 : 0,
    kScale: isFp8(poolDtype) ? kScale!.ptr : 0,
    vScale: isFp8(poolDtype) ? vScale!.ptr : 0,
    kScalePerHead: isFp8(poolDtype) && kScale!.perHead ? 1 : 0,
    vScalePerHead: isFp8(poolDtype) && vScale!.perHead ? 1 : 0,
  };
}

/** Grid of a grid-stride kernel over `elements`: enough blocks to fill the device, no more than the work. */
function gridFor(kernels: CudaKernels, elements: number, threads: number): number {
  return Math.max(1, Math.min(Math.ceil(elements / threads), kernels.cx.multiprocessors * 8));
}

/** dequantizeKv: one grid-stride launch over the rows' elements. */
export function dequantizeKv(kernels: CudaKernels, args: DequantizeKvChecked): void {
  const { N, S, H, D } = args.dims;
  if (N === 0) return;
  kernels.cx.makeCurrent();
  const pool = kernels.own(args.pool);
  const rows = kernels.own(args.rows);
  const slots = kernels.own(args.slots);
  const scale = args.scale ? kernels.own(args.scale) : undefined;
  // The kernel reads by index: views among the inputs are read from contiguous copies (rows are contiguous by the contract).
  const [poolAt, slotsAt, scaleAt] = kernels.gather.contiguous([pool, slots, ...(scale ? [scale] : [])], 'dequantizeKv');
  const slotRule = boundsOf(args.deviceChecks, 'slots', { min: -Infinity, below: S });
  deviceRules(kernels, args.deviceChecks, args.dims, { slots: slotsAt, scale: scaleAt });
  const call = kernels.badValues.checkCall('dequantizeKv');
  // Eight elements a thread, 16 bytes (8 of fp8) a load, where every row is a whole number of aligned groups of eight.
  const eights = D % 8 === 0 && poolAt! % 16 === 0 && rows.ptr % 16 === 0;
  const { threads } = LAUNCHES.poolRead.default;
  const p = kernels.params.poolRead;
  p.write({
    pool: poolAt!,
    slots: slotsAt!,
    scale: scaleAt ?? 0,
    rows: rows.ptr,
    badValue: kernels.badValues.record.ptr,
    call,
    count: N,
    heads: H,
    headDim: D,
    slotBelow: slotRule.below,
    pageSize: args.layout === 'HND' ? args.dims.pageSize! : S,
    headMajor: args.layout === 'HND' ? 1 : 0,
    poolDType: isFp8(pool.dtype) ? (pool.dtype === 'fp8e4m3' ? 3 : 4) : FLOAT_CODE[pool.dtype as FloatDType],
    rowsDType: FLOAT_CODE[rows.dtype as FloatDType],
    perHeadScale: scale && scale.shape[0]! > 1 ? 1 : 0,
    slotsAreI64: slots.dtype === 'i64' ? 1 : 0,
    eights: eights ? 1 : 0,
    largestElements: Math.max(pool.shape.reduce((n, d) => n * d, 1), N * H * D),
  });
  kernels.cx.launch('pool_read', p, gridFor(kernels, eights ? (N * H * D) / 8 : N * H * D, threads), 1, threads, 0, 'dequantizeKv');
}
