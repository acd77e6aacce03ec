import type { FloatDType } from '@kvkit/contracts';
import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ropePoolKernel } from '../runtime/kernelNames.js';
import { mropeBounds } from '@kvkit/contracts/backend';
import { boundCheck } from './normRope.js';
import { planRows } from './rowTiles.js';

/**
 * SEMANTICS.md §3 on the device: claim_slots gives each slot named by several
 * tokens to the one the contract's rule names (the last; a pool row is never
 * a mix), then one launch
 * rotates Q and K and scatters K and V into the pools. That launch may start
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
  const qNorm = args.qNormWeight && kernels.own(args.qNormWeight);
  const kNorm = args.kNormWeight && kernels.own(args.kNormWeight);
  const plan = planRows({
    kernel: 'ropePool',
    dtype,
    headDim: D,
    rotaryDim: R,
    gptj: args.ropeStyle === 'gptj',
    tokens: N,
    headRows: Hq + 2 * H,
    // The norm weights are read 16 bytes at a time on the vector paths too.
    vectorAddresses: [q.ptr, k.ptr, v.ptr, qRot.ptr, kRot.ptr, kPool.ptr, vPool.ptr, ...(qNorm ? [qNorm.ptr] : []), ...(kNorm ? [kNorm.ptr] : [])],
    multiprocessors: cx.multiprocessors,
  });
  const slotRule = boundCheck(kernels, args.deviceChecks, 'slots', args.dims, { min: -Infinity, below: S });
  // Enqueued before the claims (a first use uploads the table): the pool kernel must directly follow claim_slots.
  const frequencies = kernels.ropeFrequencies(args.ropeBase, R, op);
  const claims = kernels.slotOwners.claim(slots.ptr, slots.dtype === 'i64', N, S, args.duplicates.slots, op);
  const p = kernels.params.ropePool;
  p.write({
    q: q.ptr,
    k: k.ptr,
    v: v.ptr,
    ropeFrequencies: frequencies,
    positions: positions.ptr,
    slots: slots.ptr,
    ...streamParams(args, N, R),
    qNormWeight: qNorm ? qNorm.ptr : 0,
    kNormWeight: kNorm ? kNorm.ptr : 0,
    qNormWeightIsF32: qNorm?.dtype === 'f32' ? 1 : 0,
    kNormWeightIsF32: kNorm?.dtype === 'f32' ? 1 : 0,
    normEps: args.eps ?? 0,
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

/** mRoPE's streams as the kernel takes them (rope_pool.cu, mrope.cuh); one stream without mropeSection. */
function streamParams(args: RopePoolFusedChecked, N: number, R: number) {
  if (!args.mropeSection) return { positionStreamStride: 0, mropeTemporalPairs: R / 2, mropeHeightPairsEnd: R / 2 };
  const [temporalPairs, heightPairsEnd] = mropeBounds(args.mropeSection);
  return { positionStreamStride: N, mropeTemporalPairs: temporalPairs, mropeHeightPairsEnd: heightPairsEnd };
}
