import type { FloatDType } from '@kvkit/contracts';
import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { ropePoolKernel } from '../runtime/kernelNames.js';
import { boundCheck } from './normRope.js';
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
  // q, k and v are read through their strides; the index tensors as contiguous copies where they are views.
  const [positionsAt, slotsAt] = kernels.gather.contiguous([positions, slots], op);
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
