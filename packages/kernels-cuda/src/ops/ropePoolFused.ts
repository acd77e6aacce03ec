import type { FloatDType } from '@kvkit/contracts';
import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { ropePoolKernel } from '../runtime/kernelNames.js';
import { boundCheck } from './normRope.js';
import { poolScales, storePoolRows } from './kvPools.js';
import type { PoolScale } from './kvPools.js';
import { planRows, rowStrides } from './rowTiles.js';
import type { RowStrides } from './rowTiles.js';

/**
 * SEMANTICS.md §3 on the device: claim_slots gives each slot named by several
 * tokens to the one the contract's rule names (the last; a pool row is never
 * a mix), then one launch
 * rotates Q and K and scatters K and V into the pools. q, k and v may be
 * views (of one fused qkv projection): the launch reads them through their
 * strides, 16 bytes at a time where their rows are contiguous and aligned. That launch may start
 * while the claims finish (Hopper): its query rows need no slot, and it waits
 * for the claims before it looks a slot's owner up.
 */
export function ropePoolFused(kernels: CudaKernels, args: RopePoolFusedChecked): { qRot: CudaTensor; kRot: CudaTensor } {
  const op = 'ropePoolFused';
  const { N, Hq, H, D, R, S } = args.dims;
  const q = kernels.own(args.q);
  const dtype = q.dtype as FloatDType;
  const qRot = kernels.allocate(dtype, [N, Hq, D], op);
  const kRot = kernels.allocate(dtype, [N, H, D], op);
  if (N === 0) return { qRot, kRot };
  const cx = kernels.cx;
  cx.makeCurrent();
  const k = kernels.own(args.k);
  const v = kernels.own(args.v);
  const kPool = kernels.own(args.kPool);
  const vPool = kernels.own(args.vPool);
  const positions = kernels.own(args.positions);
  const slots = kernels.own(args.slots);
  const scales = [args.kScale, args.vScale].map((s) => (s ? kernels.own(s) : undefined));
  // q, k and v are read through their strides; the index tensors (and fp8 scales) as contiguous copies where they are views.
  const [positionsAt, slotsAt, ...scalesAt] = kernels.gather.contiguous([positions, slots, ...scales.filter((s) => s !== undefined)], op);
  const [qRows, kRows, vRows] = [q, k, v].map(rowStrides) as [RowStrides, RowStrides, RowStrides];
  const es = ELEMENT_BYTES[dtype];
  const plan = planRows({
    kernel: 'ropePool',
    dtype,
    headDim: D,
    rotaryDim: R,
    gptj: args.ropeStyle === 'gptj',
    tokens: N,
    headRows: Hq + 2 * H,
    vectorAddresses: [q.ptr, k.ptr, v.ptr, qRot.ptr, kRot.ptr, kPool.ptr, vPool.ptr, ...[qRows, kRows, vRows].flatMap((r) => [r.token * es, r.head * es])],
    elementStrides: [qRows.element, kRows.element, vRows.element],
    multiprocessors: cx.multiprocessors,
  });
  if (args.layout !== 'NHD' || args.kScale !== undefined) return ropeIntoPools(kernels, args, { q, k, v, qRot, kRot }, { positions: positionsAt!, slots: slotsAt!, scales: poolScales(scales, scalesAt) });
  const slotRule = boundCheck(kernels, args.deviceChecks, 'slots', args.dims, { min: -Infinity, below: S });
  // Enqueued before the claims (a first use uploads the table): the pool kernel must directly follow claim_slots.
  const frequencies = kernels.ropeFrequencies(args.ropeBase, R, op);
  const claims = kernels.slotOwners.claim(slotsAt!, slots.dtype === 'i64', N, S, args.duplicates.slots, op);
  const p = kernels.params.ropePool;
  p.write({
    q: q.ptr,
    k: k.ptr,
    v: v.ptr,
    qTokenStride: qRows.token,
    qHeadStride: qRows.head,
    qElementStride: qRows.element,
    kTokenStride: kRows.token,
    kHeadStride: kRows.head,
    kElementStride: kRows.element,
    vTokenStride: vRows.token,
    vHeadStride: vRows.head,
    vElementStride: vRows.element,
    ropeFrequencies: frequencies,
    positions: positionsAt!,
    slots: slotsAt!,
    qRot: qRot.ptr,
    kRot: kRot.ptr,
    kPool: kPool.ptr,
    vPool: vPool.ptr,
    badValue: kernels.badValues.record.ptr,
    numTokens: N,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
    gptj: args.ropeStyle === 'gptj' ? 1 : 0,
    positionsAreI64: positions.dtype === 'i64' ? 1 : 0,
    slotsAreI64: slots.dtype === 'i64' ? 1 : 0,
    slotBelow: slotRule.below,
    slotCheck: slotRule.check,
    slotOwners: claims.table,
    slotOwnersMask: claims.mask,
    generation: claims.generation,
    rowsPerUnit: plan.rowsPerUnit,
    unitsPerToken: plan.unitsPerToken,
    lanesPerRow: plan.lanesPerRow,
  });
  const kernel = ropePoolKernel(dtype, plan.path);
  // Overlap only with claim_slots, the launch just before (none for a single token).
  if (claims.table !== 0) cx.launchOverlapping(kernel, p, plan.grid, plan.block, plan.sharedBytes, op);
  else cx.launch(kernel, p, plan.grid, 1, plan.block, plan.sharedBytes, op);
  return { qRot, kRot };
}

/**
 * Paged or fp8 pools: Q and K rotated as dense rows (the kernel's query path,
 * one launch per tensor, read through their strides, no pool rows), then K
 * and V stored by pool_store (V read through its strides).
 */
function ropeIntoPools(kernels: CudaKernels, args: RopePoolFusedChecked, t: { q: CudaTensor; k: CudaTensor; v: CudaTensor; qRot: CudaTensor; kRot: CudaTensor }, at: { positions: number; slots: number; scales: (PoolScale | undefined)[] }) {
  const op = 'ropePoolFused';
  const { N, Hq, H, D, R } = args.dims;
  const dtype = t.q.dtype as FloatDType;
  const es = ELEMENT_BYTES[dtype];
  const positions = kernels.own(args.positions);
  const slots = kernels.own(args.slots);
  const [kScale, vScale] = at.scales;
  const frequencies = kernels.ropeFrequencies(args.ropeBase, R, op);
  for (const [src, dst, heads] of [[t.q, t.qRot, Hq], [t.k, t.kRot, H]] as const) {
    const rows = rowStrides(src);
    const plan = planRows({ kernel: 'ropePool', dtype, headDim: D, rotaryDim: R, gptj: args.ropeStyle === 'gptj', tokens: N, headRows: heads, vectorAddresses: [src.ptr, dst.ptr, rows.token * es, rows.head * es], elementStrides: [rows.element], multiprocessors: kernels.cx.multiprocessors });
    const p = kernels.params.ropePool;
    p.write({
      q: src.ptr,
      k: src.ptr,
      v: src.ptr,
      qTokenStride: rows.token,
      qHeadStride: rows.head,
      qElementStride: rows.element,
      kTokenStride: rows.token,
      kHeadStride: rows.head,
      kElementStride: rows.element,
      vTokenStride: rows.token,
      vHeadStride: rows.head,
      vElementStride: rows.element,
      ropeFrequencies: frequencies,
      positions: at.positions,
      slots: at.slots,
      qRot: dst.ptr,
      kRot: dst.ptr,
      kPool: 0,
      vPool: 0,
      badValue: kernels.badValues.record.ptr,
      numTokens: N,
      numQoHeads: heads,
      numKvHeads: 0,
      headDim: D,
      rotaryDim: R,
      gptj: args.ropeStyle === 'gptj' ? 1 : 0,
      positionsAreI64: positions.dtype === 'i64' ? 1 : 0,
      slotsAreI64: slots.dtype === 'i64' ? 1 : 0,
      // With no key heads no row writes a pool; a slot bound no slot reaches keeps the slot lookups silent.
      slotBelow: Number.MAX_SAFE_INTEGER,
      slotCheck: 0xffffffff,
      slotOwners: 0,
      slotOwnersMask: 0,
      generation: 0,
      rowsPerUnit: plan.rowsPerUnit,
      unitsPerToken: plan.unitsPerToken,
      lanesPerRow: plan.lanesPerRow,
    });
    kernels.cx.launch(ropePoolKernel(dtype, plan.path), p, plan.grid, 1, plan.block, plan.sharedBytes, op);
  }
  const job = { sourceType: dtype, layers: 1, tokens: N, layout: args.layout, dims: args.dims, slots: { ptr: at.slots, areI64: slots.dtype === 'i64' }, duplicates: args.duplicates.slots, deviceChecks: args.deviceChecks, callDims: args.dims, op };
  storePoolRows(kernels, job, [
    { source: t.kRot.ptr, sourceLayerElements: 0, sourceRows: rowStrides(t.kRot), pool: kernels.own(args.kPool), scale: kScale },
    { source: t.v.ptr, sourceLayerElements: 0, sourceRows: rowStrides(t.v), pool: kernels.own(args.vPool), scale: vScale },
  ]);
  return { qRot: t.qRot, kRot: t.kRot };
}
