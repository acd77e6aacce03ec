import type { FloatDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { FLOAT_CODE } from '@kvkit/contracts/kernels';
import type { DequantizeKvChecked, DeviceCheck, DuplicateRule, PoolLayoutName } from '@kvkit/contracts/backend';
import { LAUNCHES } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import type { RowStrides } from './rowTiles.js';
import { boundCheck } from './normRope.js';

/** An fp8 pool's scale as the kernel reads it: contiguous f32 at `ptr`, one per head or one for all. */
export interface PoolScale {
  readonly ptr: number;
  readonly perHead: boolean;
}

/** Rows `[L, T, H, D]` of the model dtype at `source` (element 0 of layer 0), for one pool (and its scale, where fp8). */
export interface PoolRows {
  readonly source: number;
  /** Elements between layers of the source. */
  readonly sourceLayerElements: number;
  /** Elements between tokens, heads and a row's elements of the source (a view's strides). */
  readonly sourceRows: RowStrides;
  /** Contiguous (the contract's rule); a view's offset is in its pointer. */
  readonly pool: CudaTensor;
  readonly scale: PoolScale | undefined;
}

/** The scales `[kScale?, vScale?]` at the addresses the gather gave the present ones, in order. */
export function poolScales(scales: readonly (CudaTensor | undefined)[], gathered: readonly number[]): (PoolScale | undefined)[] {
  let next = 0;
  return scales.map((s) => (s ? { ptr: gathered[next++]!, perHead: s.shape[0]! > 1 } : undefined));
}

export interface PoolStoreJob {
  readonly sourceType: FloatDType;
  readonly layers: number;
  readonly tokens: number;
  readonly layout: PoolLayoutName;
  readonly dims: { readonly S: number; readonly H: number; readonly D: number; readonly pageSize?: number };
  /** The slots, contiguous (gathered where a view). */
  readonly slots: { readonly ptr: number; readonly areI64: boolean };
  readonly duplicates: DuplicateRule;
  readonly deviceChecks: readonly DeviceCheck[];
  /** Dims of the call, for the slot rule's message. */
  readonly callDims: Readonly<Record<string, number>>;
  readonly op: string;
}

/** Grid of a grid-stride kernel over `elements`: enough blocks to fill the device, no more than the work. */
function gridFor(kernels: CudaKernels, elements: number, threads: number): number {
  return Math.max(1, Math.min(Math.ceil(elements / threads), kernels.cx.multiprocessors * 8));
}

/**
 * K and V rows into pools of any layout and dtype: the claim pass (one token
 * per contested slot), then one launch per pool; the slot rule is numbered
 * once and recorded by either launch (the same token and value).
 */
export function storePoolRows(kernels: CudaKernels, job: PoolStoreJob, pools: readonly PoolRows[]): void {
  const { S, H, D } = job.dims;
  const slotRule = boundCheck(kernels, job.deviceChecks, 'slots', job.callDims, { min: -Infinity, below: S });
  const claims = kernels.slotOwners.claim(job.slots.ptr, job.slots.areI64, job.tokens, S, job.duplicates, job.op);
  const { threads } = LAUNCHES.poolStore.default;
  const elements = job.layers * job.tokens * H * D;
  for (const { source, sourceLayerElements, sourceRows, pool, scale } of pools) {
    const p = kernels.params.poolStore;
    p.write({
      source,
      slots: job.slots.ptr,
      scale: scale ? scale.ptr : 0,
      pool: pool.ptr,
      badValue: kernels.badValues.record.ptr,
      slotOwners: claims.table,
      layers: job.layers,
      tokens: job.tokens,
      heads: H,
      headDim: D,
      slotBelow: slotRule.below,
      pageSize: job.layout === 'HND' ? job.dims.pageSize! : S,
      headMajor: job.layout === 'HND' ? 1 : 0,
      sourceLayerElements,
      sourceTokenStride: sourceRows.token,
      sourceHeadStride: sourceRows.head,
      sourceElementStride: sourceRows.element,
      sourceDType: FLOAT_CODE[job.sourceType],
      poolDType: pool.dtype === 'fp8e4m3' ? 1 : pool.dtype === 'fp8e5m2' ? 2 : 0,
      perHeadScale: scale?.perHead ? 1 : 0,
      slotsAreI64: job.slots.areI64 ? 1 : 0,
      slotCheck: slotRule.check,
      slotOwnersMask: claims.mask,
      generation: claims.generation,
    });
    kernels.cx.launch('pool_store', p, gridFor(kernels, elements, threads), 1, threads, 0, job.op);
  }
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
  const slotRule = boundCheck(kernels, args.deviceChecks, 'slots', args.dims, { min: -Infinity, below: S });
  const { threads } = LAUNCHES.poolRead.default;
  const p = kernels.params.poolRead;
  p.write({
    pool: poolAt!,
    slots: slotsAt!,
    scale: scaleAt ?? 0,
    rows: rows.ptr,
    badValue: kernels.badValues.record.ptr,
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
    slotCheck: slotRule.check,
  });
  kernels.cx.launch('pool_read', p, gridFor(kernels, N * H * D, threads), 1, threads, 0, 'dequantizeKv');
}
