import type { FloatDType } from '@kvkit/contracts';
import type { DeviceCheck, DuplicateRule } from '@kvkit/contracts/backend';
import { FLOAT_CODE } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import type { SlotClaims } from '../runtime/slotOwners.js';
import { ownerParams } from '../runtime/slotOwners.js';
import { fusedKernel } from '../runtime/kernelNames.js';
import { DENSE_ROWS } from './kvPools.js';
import type { PoolWrite } from './kvPools.js';
import { streamParams } from './positionStreams.js';
import { planRows, vectorPathFits } from './rowTiles.js';

/** Where the angles come from: cache rows (bounds [0, P)), or f_j = ropeBase^(-2j/R) on the device. */
export type Angles = { readonly cache: number; readonly cacheDType: FloatDType } | { readonly ropeAngles: number };

/** The bounds a kernel keeps an index tensor's values to (a call whose values break them never reaches it: check_values). */
export interface BoundCheck {
  readonly min: number;
  readonly below: number;
}

/**
 * One launch of the norm + RoPE kernel. K row (t, l, h) is read at
 * t*tokenStride + l*layerStride + h*headStride elements into `kv` (its
 * elements elementStride apart), its V row vOffset later; both are written at l*outLayerStride + (row*H + h)*D of kOut and vOut
 * (or at the row's place in an HND pool, as fp8 codes in an fp8 one: `pools`), row being t or slots[t]. vOut 0: V is not copied (K normed in place, kOut = kv).
 */
export interface NormRopeJob {
  readonly op: string;
  readonly dtype: FloatDType;
  readonly T: number;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly gptj: boolean;
  readonly kv: number;
  readonly kvLayout: KvLayout;
  readonly kNormWeight: number;
  readonly weightIsF32: boolean;
  readonly eps: number;
  readonly angles: Angles;
  readonly positions: number;
  readonly positionsAreI64: boolean;
  /** mRoPE: positions are [3, T] (stream s of token t at s*T + t), pairs split over the streams by this section. */
  readonly mropeSection?: readonly number[] | undefined;
  /** mRoPE's interleaved layout (Qwen3-VL) of mropeSection. */
  readonly mropeInterleaved?: boolean;
  readonly positionRule: BoundCheck;
  /** Pools: token t goes to row slots[t] (negative: skipped; of tokens naming one slot, the one `duplicates` names). */
  readonly slots?: PoolSlots;
  readonly kOut: number;
  readonly vOut: number;
  readonly outLayerStride: number;
  /** How rows are placed and stored in a layer of kOut and vOut where they are pools; dense rows (DENSE_ROWS) where absent. */
  readonly pools?: PoolWrite;
}

/** A pool write's slots: the index tensor, its bound, and the contract's rule for tokens sharing a slot. */
export interface PoolSlots {
  readonly ptr: number;
  readonly areI64: boolean;
  readonly rule: BoundCheck;
  readonly duplicates: DuplicateRule;
}

/** Where K and V rows sit in a projection output (or a view of one), in elements. */
export interface KvLayout {
  readonly tokenStride: number;
  readonly layerStride: number;
  readonly headStride: number;
  readonly elementStride: number;
  readonly vOffset: number;
}

/**
 * [T, L, 2*H*D]: a token's layers side by side, V after K in each
 * (fusedNormRopeStacked's kv, one GEMM's output), read through the view's
 * strides (a dim of size 1 steps nowhere).
 */
export function tokenMajorLayout(kv: { readonly shape: readonly number[]; readonly strides: readonly number[] }, H: number, D: number): KvLayout {
  const [T, L] = kv.shape as [number, number, number];
  const [tokenStride, layerStride, elementStride] = kv.strides as [number, number, number];
  return { tokenStride: T === 1 ? 0 : tokenStride, layerStride: L === 1 ? 0 : layerStride, headStride: D * elementStride, elementStride, vOffset: H * D * elementStride };
}

/** [L, 2, T, H*D]: per layer all tokens' K, then all their V (the per-layer GEMMs' output, and layer views of it). */
export function layerMajorLayout(T: number, H: number, D: number): KvLayout {
  return { tokenStride: H * D, layerStride: 2 * T * H * D, headStride: D, elementStride: 1, vOffset: T * H * D };
}

/** The bounds the kernels keep an index tensor's values to: its rule's where the device checks it, else the fallback (the host checked it). */
export function boundsOf(checks: readonly DeviceCheck[], arg: string, fallback: BoundCheck): BoundCheck {
  const rule = checks.find((c) => c.arg === arg);
  return rule ? { min: rule.min ?? -Infinity, below: rule.below ?? Infinity } : fallback;
}

/**
 * Hands the rules the contracts left to the device to the call's check
 * (BadValues.checkCall) in the contract's order, so the first bad value found
 * is the one the host check names; `at` gives the device address of each
 * rule's values, contiguous.
 */
export function deviceRules(kernels: CudaKernels, checks: readonly DeviceCheck[], dims: Readonly<Record<string, number>>, at: Readonly<Record<string, number | undefined>>): void {
  for (const rule of checks) {
    const values = at[rule.arg];
    if (values === undefined) throw new Error(`${rule.op}: no contiguous copy of ${rule.arg} for its device check`);
    kernels.badValues.enqueue(rule, dims, values);
  }
}

/** Whether the job's rows (T tokens of L*H) take the vector kernel (which can work in place; the element-by-element one cannot). */
export function normRopeVectorPath(dtype: FloatDType, D: number, R: number, gptj: boolean, addresses: readonly number[], rows: { tokens: number; headRows: number }): boolean {
  return vectorPathFits({ dtype, headDim: D, rotaryDim: R, gptj, vectorAddresses: addresses, ...rows });
}

/** An f32 cache whose cos and sin runs a lane reads are 16-byte aligned (R a multiple of 8, the base aligned). */
function cacheVectors(angles: Angles, R: number): boolean {
  return 'cache' in angles && angles.cacheDType === 'f32' && angles.cache % 16 === 0 && R % 8 === 0;
}

/** Enqueues the claim pass for a call's slots, which picks by the contract's rule the one token that writes a shared slot. */
export function claimSlots(kernels: CudaKernels, slots: PoolSlots, T: number, op: string): SlotClaims {
  return kernels.slotOwners.claim(slots.ptr, slots.areI64, T, slots.rule.below, slots.duplicates, op);
}

/**
 * Enqueues the norm + RoPE; writing pools at slots, after the claim pass (`claimed`: one the caller already enqueued).
 * `beside`: a plain launch on that stream instead, gated on the value check `call` the caller launched (one check
 * for several launches), its claims enqueued by the caller where that stream waits for them; its grid sized for
 * `multiprocessors` where given (the rest of the device busy with other work), else for the whole device.
 */
export function launchNormRope(kernels: CudaKernels, job: NormRopeJob, claimed?: SlotClaims, beside?: { readonly stream: bigint; readonly call: number; readonly multiprocessors?: number | undefined }): void {
  if (job.T === 0) return;
  if (beside && job.slots && !claimed) throw new Error(`${job.op}: a launch beside the main stream needs the claims enqueued ahead of it`);
  const cx = kernels.cx;
  const layout = job.kvLayout;
  const plan = planRows({
    kernel: 'normRope',
    dtype: job.dtype,
    headDim: job.D,
    rotaryDim: job.R,
    gptj: job.gptj,
    tokens: job.T,
    headRows: job.L * job.H,
    vectorAddresses: [job.kv, job.kNormWeight, job.kOut, job.vOut, ...[layout.vOffset, layout.tokenStride, layout.layerStride].map((e) => e * ELEMENT_BYTES[job.dtype])],
    elementStrides: [layout.elementStride],
    gpu: beside?.multiprocessors ? { ...cx.launchLimits, multiprocessors: beside.multiprocessors } : cx.launchLimits,
  });
  const claims = claimed ?? (job.slots ? claimSlots(kernels, job.slots, job.T, job.op) : undefined);
  const cache = 'cache' in job.angles ? job.angles : undefined;
  // After the projection and the claims, which write nothing of the caller's: the norm kernel waits for this check.
  const call = beside ? beside.call : kernels.badValues.checkCall(job.op);
  const p = kernels.params.normRope;
  p.write({
    kv: job.kv,
    kNormWeight: job.kNormWeight,
    eps: job.eps,
    cosSinCache: cache ? cache.cache : 0,
    ropeAngles: 'ropeAngles' in job.angles ? job.angles.ropeAngles : 0,
    positions: job.positions,
    ...streamParams(job, job.T, job.R),
    slots: job.slots ? job.slots.ptr : 0,
    kOut: job.kOut,
    vOut: job.vOut,
    ...(job.pools ?? DENSE_ROWS),
    badValue: kernels.badValues.record.ptr,
    call,
    numTokens: job.T,
    numLayers: job.L,
    numKvHeads: job.H,
    headDim: job.D,
    rotaryDim: job.R,
    kvTokenStride: layout.tokenStride,
    kvLayerStride: layout.layerStride,
    kvHeadStride: layout.headStride,
    kvElementStride: layout.elementStride,
    vOffset: layout.vOffset,
    outLayerStride: job.outLayerStride,
    gptj: job.gptj ? 1 : 0,
    weightIsF32: job.weightIsF32 ? 1 : 0,
    cacheDType: cache ? FLOAT_CODE[cache.cacheDType] : 0,
    cacheVectors: cacheVectors(job.angles, job.R) ? 1 : 0,
    positionsAreI64: job.positionsAreI64 ? 1 : 0,
    slotsAreI64: job.slots?.areI64 ? 1 : 0,
    positionMin: job.positionRule.min,
    positionBelow: job.positionRule.below,
    slotBelow: job.slots ? job.slots.rule.below : Infinity,
    ...ownerParams(claims),
    rowsPerUnit: plan.rowsPerUnit,
    unitsPerToken: plan.unitsPerToken,
    lanesPerRow: plan.lanesPerRow,
  });
  // The kernel waits for the grid ahead before touching memory, so it may launch while that grid runs.
  if (beside) cx.launch(fusedKernel(job.dtype, plan.path, plan.pairedLanes), p, plan.grid, 1, plan.block, plan.sharedBytes, job.op, 1, beside.stream);
  else cx.launchOverlapping(fusedKernel(job.dtype, plan.path, plan.pairedLanes), p, plan.grid, plan.block, plan.sharedBytes, job.op);
}
