import { ownerParams } from '../runtime/slotOwners.js';
import { NO_RULES } from '../runtime/badValues.js';
import { tuning } from './tuning.js';
import { LAUNCHES } from '../generated/kernels.js';
import type { FloatDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { ropePoolKernel } from '../runtime/kernelNames.js';
import { contiguousStrides } from '@kvkit/contracts/backend';
import { aligned } from '../runtime/gatherStrided.js';
import { boundsOf, deviceRules } from './normRope.js';
import { streamParams } from './positionStreams.js';
import { poolScales, poolWrite } from './kvPools.js';
import { planRows, rowStrides, vectorPathFits } from './rowTiles.js';
import type { RowStrides } from './rowTiles.js';

/** Values a rule of a one-launch call may have, per token of the most it takes: mRoPE's three position streams (the others fewer). */
const ONE_LAUNCH_MOST_VALUES = 3;

/**
 * SEMANTICS.md §3 on the device: claim_slots gives each slot named by several
 * tokens to the one the contract's rule names (the last; a pool row is never
 * a mix), then one launch
 * rotates Q and K and scatters K and V into the pools, NHD or HND, in the
 * model dtype or as fp8 codes, from the rows it holds. q, k and v may be
 * views (of one fused qkv projection): the launch reads them through their
 * strides, 16 bytes at a time where their rows are contiguous and aligned
 * (with a Q/K-norm, a view that would miss that is copied first: stagedRows).
 * That launch may start while the claims finish (Hopper): its query rows need
 * no slot, and it waits for the claims before it looks a slot's owner up.
 * A call of at most tuning.oneLaunchMostTokens tokens is that launch alone: each
 * block tests the call's rules over all their values before it writes, and a
 * token leaves its slot to a later token naming it.
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
  const scales = [args.kScale, args.vScale].map((s) => (s ? kernels.own(s) : undefined));
  const es = ELEMENT_BYTES[dtype];
  const shape = { kernel: 'ropePool', dtype, headDim: D, rotaryDim: R, gptj: args.ropeStyle === 'gptj', tokens: N, headRows: Hq + 2 * H, gpu: cx.launchLimits } as const;
  const written = [qRot.ptr, kRot.ptr, kPool.ptr, vPool.ptr];
  const rows = [q, k, v] as const;
  const staged = stagedRows(rows, qNorm !== undefined || kNorm !== undefined, vectorPathFits({ ...shape, vectorAddresses: written }), es);
  // q, k and v are read through their strides (unless staged); the index tensors, norm weights and fp8 scales as contiguous copies where they are views.
  const weights = [qNorm, kNorm].filter((w) => w !== undefined).map((w) => aligned(w, 16));
  const present = scales.filter((s) => s !== undefined);
  const gathered = kernels.gather.contiguous([positions, slots, ...weights, ...rows.filter((_, i) => staged[i]).map((t) => aligned(t, 16)), ...present], op);
  let taken = 0;
  const take = () => gathered[taken++]!;
  const positionsAt = take();
  const slotsAt = take();
  const qNormAt = qNorm ? take() : 0;
  const kNormAt = kNorm ? take() : 0;
  const inputs: RowInput[] = rows.map((t, i) => (staged[i] ? { ptr: take(), rows: rowStrides({ shape: t.shape, strides: contiguousStrides(t.shape) }) } : { ptr: t.ptr, rows: rowStrides(t) }));
  const [qAt, kAt, vAt] = inputs as [RowInput, RowInput, RowInput];
  const [kScaleAt, vScaleAt] = poolScales(scales, present.map(() => take()));
  const pools = poolWrite(args.layout, args.dims, kPool.dtype as PoolDType, [kScaleAt, vScaleAt]);
  const plan = planRows({
    ...shape,
    // The norm weights are read 16 bytes at a time on the vector paths too.
    vectorAddresses: [qAt.ptr, kAt.ptr, vAt.ptr, ...written, ...(qNorm ? [qNormAt] : []), ...(kNorm ? [kNormAt] : []), ...inputs.flatMap((r) => [r.rows.token * es, r.rows.head * es])],
    elementStrides: inputs.map((r) => r.rows.element),
  });
  const slotRule = boundsOf(args.deviceChecks, 'slots', { min: -Infinity, below: S });
  // Enqueued first (a first use uploads the table): the check, the claims and the pool kernel follow each other directly.
  const angles = kernels.ropeAngles({ ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles }, op);
  deviceRules(kernels, args.deviceChecks, args.dims, { slots: slotsAt, kScale: kScaleAt?.ptr, vScale: vScaleAt?.ptr });
  // A call of few tokens is one launch that tests its rules and settles its duplicate slots itself. Otherwise the check
  // waits for all work ahead; the claims run beside it, and the pool kernel beside both until it writes.
  // Only the token tiles do (rope_pool_tiles.cuh), a thread's token against the tile's: a call of at most a block's
  // threads, whose later token takes a slot (the contract's rule; another goes through claim_slots).
  const oneLaunchMost = Math.min(tuning.oneLaunchMostTokens, LAUNCHES.ropePool.nv1.threads);
  const oneLaunch = plan.path === 'nv1' && N <= oneLaunchMost && args.duplicates.slots === 'last' ? kernels.badValues.checkInKernel(ONE_LAUNCH_MOST_VALUES * oneLaunchMost) : undefined;
  const call = oneLaunch ? oneLaunch.call : kernels.badValues.checkCall(op);
  const claims = oneLaunch ? undefined : kernels.slotOwners.claim(slotsAt, slots.dtype === 'i64', N, S, args.duplicates.slots, op, call !== 0);
  const p = kernels.params.ropePool;
  p.write({
    q: qAt.ptr,
    k: kAt.ptr,
    v: vAt.ptr,
    qTokenStride: qAt.rows.token,
    qHeadStride: qAt.rows.head,
    qElementStride: qAt.rows.element,
    kTokenStride: kAt.rows.token,
    kHeadStride: kAt.rows.head,
    kElementStride: kAt.rows.element,
    vTokenStride: vAt.rows.token,
    vHeadStride: vAt.rows.head,
    vElementStride: vAt.rows.element,
    ropeAngles: angles,
    positions: positionsAt,
    slots: slotsAt,
    ...streamParams(args, N, R),
    qNormWeight: qNormAt,
    kNormWeight: kNormAt,
    qNormWeightIsF32: qNorm?.dtype === 'f32' ? 1 : 0,
    kNormWeightIsF32: kNorm?.dtype === 'f32' ? 1 : 0,
    normEps: args.eps ?? 0,
    qRot: qRot.ptr,
    kRot: kRot.ptr,
    kPool: kPool.ptr,
    vPool: vPool.ptr,
    ...pools,
    badValue: kernels.badValues.record.ptr,
    call,
    ...(oneLaunch?.rules ?? NO_RULES),
    inlineOwners: oneLaunch && N > 1 ? 1 : 0,
    numTokens: N,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
    gptj: args.ropeStyle === 'gptj' ? 1 : 0,
    positionsAreI64: positions.dtype === 'i64' ? 1 : 0,
    slotsAreI64: slots.dtype === 'i64' ? 1 : 0,
    slotBelow: slotRule.below,
    ...ownerParams(claims),
    tokensPerBlock: plan.tokensPerBlock,
    rowsPerUnit: plan.rowsPerUnit,
    unitsPerToken: plan.unitsPerToken,
    lanesPerRow: plan.lanesPerRow,
  });
  const kernel = ropePoolKernel(dtype, plan.path, isFp8(kPool.dtype as PoolDType), plan.pairedLanes);
  // Beside claim_slots or check_values, the launch just before, which write nothing it reads; it waits for them
  // before it writes. A one-launch call overlaps the grid ahead too: every block waits for it before it reads.
  // Plain behind anything else (no rule on the device, a single token).
  if (oneLaunch ? oneLaunch.call !== 0 : claims!.table !== 0 || call !== 0) cx.launchOverlapping(kernel, p, plan.grid, plan.block, plan.sharedBytes, op);
  else cx.launch(kernel, p, plan.grid, 1, plan.block, plan.sharedBytes, op);
  return { qRot, kRot };
}

/** Where the launch reads one of q, k and v: its address and row strides (a staged copy's, contiguous). */
interface RowInput {
  readonly ptr: number;
  readonly rows: RowStrides;
}

/**
 * Which of q, k and v are copied contiguous first. The norm's sum of squares
 * adds up in another order on the element path than on the vector path, so
 * with a norm, an input whose layout alone would keep the call off the vector
 * path (inner stride, or rows off 16 bytes) is staged: a view then gives
 * exactly what its contiguous copy gives. Without a norm both paths agree bit
 * for bit, and views are read in place.
 */
export function stagedRows(rows: readonly Pick<CudaTensor, 'ptr' | 'shape' | 'strides'>[], normed: boolean, shapeFits: boolean, es: number): boolean[] {
  return rows.map((t) => {
    if (!normed || !shapeFits) return false;
    const r = rowStrides(t);
    return r.element !== 1 || [t.ptr, r.token * es, r.head * es].some((a) => a % 16 !== 0);
  });
}
