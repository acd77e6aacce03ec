import { ownerParams } from '../runtime/slotOwners.js';
import type { FloatDType } from '@kvkit/contracts';
import type { MlaPoolFusedChecked } from '@kvkit/contracts/backend';
import { LAUNCHES } from '../generated/kernels.js';
import type { KernelName } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { aligned } from '../runtime/gatherStrided.js';
import { boundsOf, deviceRules } from './normRope.js';
import { tuning } from './tuning.js';

/** Blocks per multiprocessor the vector path's grid aims at before a block takes more tokens. */
const BLOCKS_PER_SM = 8;
/** Shared memory a block of the vector path takes at most, for its tokens' angles. */
const SHARED_BYTES = 32 * 1024;

/** A tensor's inner stride is 1 (or its last dim 1): its rows are contiguous, read through the outer strides. */
const rowsContiguous = (t: CudaTensor) => t.shape.at(-1) === 1 || t.strides.at(-1) === 1;

/**
 * mlaPoolFused on the device (mla_pool.cu): the call's value check, the slot
 * claims (the last token naming a slot writes it, whole), then one launch:
 * each block puts its tokens' cos/sin in shared memory, writes their latent
 * rows into the pool (RMSNorm over C, RoPE of the last R, rounded once to
 * kvLatent's dtype, fp8 codes of that over the scale) and rotates their
 * query heads' RoPE part into qRot. kvLatent and q are read in place through
 * their strides (views of a fused projection among them) where their rows are
 * contiguous; 16 bytes at a time where C, R, Dq and every row start allow.
 */
export function mlaPoolFused(kernels: CudaKernels, args: MlaPoolFusedChecked): { qRot?: CudaTensor } {
  const op = 'mlaPoolFused';
  const { N, C, R, S } = args.dims;
  const Hq = args.dims.Hq ?? 0;
  const Dq = args.dims.Dq ?? 0;
  const latent = kernels.own(args.kvLatent);
  const dtype = latent.dtype as FloatDType;
  const q = args.q ? kernels.own(args.q) : undefined;
  const qRot = q ? kernels.allocate(dtype, [N, Hq, Dq], op) : undefined;
  const out = qRot ? { qRot } : {};
  if (N === 0) return out;
  const cx = kernels.cx;
  cx.makeCurrent();
  const pool = kernels.own(args.pool);
  const positions = kernels.own(args.positions);
  const slots = kernels.own(args.slots);
  const weight = kernels.own(args.kvNormWeight);
  const scale = args.scale ? kernels.own(args.scale) : undefined;
  const es = ELEMENT_BYTES[dtype];
  // Index tensors, the weight and the scale as contiguous copies where they are views; kvLatent and q copied only where their rows are not contiguous.
  const inputs = [positions, slots, aligned(weight, 16), ...(scale ? [scale] : []), ...(rowsContiguous(latent) ? [] : [aligned(latent, 16, true)]), ...(q && !rowsContiguous(q) ? [aligned(q, 16, true)] : [])];
  const gathered = kernels.gather.contiguous(inputs, op);
  let taken = 0;
  const take = () => gathered[taken++]!;
  const [positionsAt, slotsAt, weightAt] = [take(), take(), take()];
  const scaleAt = scale ? take() : 0;
  const latentAt = rowsContiguous(latent) ? { ptr: latent.ptr, token: N === 1 ? C + R : latent.strides[0]! } : { ptr: take(), token: C + R };
  const qAt = !q ? { ptr: 0, token: 0, head: 0 } : rowsContiguous(q) ? { ptr: q.ptr, token: N === 1 ? 0 : q.strides[0]!, head: Hq === 1 ? 0 : q.strides[1]! } : { ptr: take(), token: Hq * Dq, head: Dq };

  const vec = dtype === 'f32' ? 4 : 8;
  const whole = (n: number) => n % vec === 0;
  const addresses = [latentAt.ptr, latentAt.token * es, pool.ptr, weightAt, ...(q ? [qAt.ptr, qAt.token * es, qAt.head * es, qRot!.ptr] : [])];
  // The kernel indexes a block's query vectors in 32 bits.
  const fitsBlock = Hq * Dq * tuning.mlaTokensPerBlock < 2 ** 31;
  const vectors = whole(C) && whole(R) && (!q || whole(Dq)) && (args.ropeStyle === 'gptj' || whole(R / 2)) && fitsBlock && (R / 2) * 8 <= SHARED_BYTES && addresses.every((a) => a % 16 === 0);
  const kernel: KernelName = `mla_pool_${dtype}_${vectors ? 'vec' : 'any'}`;
  const threads = LAUNCHES.mlaPool[vectors ? 'vec' : 'any'].threads;
  const blocksWanted = cx.multiprocessors * BLOCKS_PER_SM;
  // A token's (cos, sin) pairs take R/2 · 8 bytes of the block's shared memory; blocks keep within 32 KiB of it.
  const tokensPerBlock = vectors ? Math.max(1, Math.min(tuning.mlaTokensPerBlock, Math.floor(N / blocksWanted), Math.floor(SHARED_BYTES / ((R / 2) * 8)))) : 1;
  const grid = vectors ? Math.ceil(N / tokensPerBlock) : Math.max(1, Math.min(Math.ceil((N * (1 + (q ? Hq : 0)) * 32) / threads), cx.multiprocessors * 16));

  const slotRule = boundsOf(args.deviceChecks, 'slots', { min: -Infinity, below: S });
  const angles = kernels.ropeAngles({ ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles }, op);
  deviceRules(kernels, args.deviceChecks, args.dims, { slots: slotsAt, scale: scaleAt });
  const call = kernels.badValues.checkCall(op);
  const claims = kernels.slotOwners.claim(slotsAt, slots.dtype === 'i64', N, S, args.duplicates.slots, op);
  const p = kernels.params.mlaPool;
  p.write({
    kvLatent: latentAt.ptr,
    latentTokenStride: latentAt.token,
    kvNormWeight: weightAt,
    kvNormWeightIsF32: weight.dtype === 'f32' ? 1 : 0,
    normEps: args.eps,
    q: qAt.ptr,
    qTokenStride: qAt.token,
    qHeadStride: qAt.head,
    qRot: qRot?.ptr ?? 0,
    ropeAngles: angles,
    positions: positionsAt,
    slots: slotsAt,
    pool: pool.ptr,
    poolDType: pool.dtype === 'fp8e4m3' ? 1 : pool.dtype === 'fp8e5m2' ? 2 : 0,
    scale: scaleAt,
    badValue: kernels.badValues.record.ptr,
    call,
    numTokens: N,
    numQoHeads: q ? Hq : 0,
    qHeadDim: Dq,
    kvLoraRank: C,
    ropeDim: R,
    gptj: args.ropeStyle === 'gptj' ? 1 : 0,
    positionsAreI64: positions.dtype === 'i64' ? 1 : 0,
    slotsAreI64: slots.dtype === 'i64' ? 1 : 0,
    slotBelow: slotRule.below,
    ...ownerParams(claims),
    tokensPerBlock,
  });
  // After the check and the claims on the stream: the kernel reads the verdict and the owners as they left them.
  cx.launch(kernel, p, grid, 1, threads, vectors ? tokensPerBlock * (R / 2) * 8 : 0, op);
  return out;
}
