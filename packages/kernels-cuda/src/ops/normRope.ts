import type { DeviceCheck, FloatDType } from '@kvkit/contracts';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { fusedKernel } from '../runtime/kernelNames.js';
import { FLOAT_CODE } from './floatCode.js';
import { planRows } from './rowTiles.js';

/** Where the angles come from: cache rows (bounds [0, P)), or f_j = ropeBase^(-2j/R) on the device. */
export type Angles = { readonly cache: number; readonly cacheDType: FloatDType } | { readonly ropeFrequencies: number };

/** A device-side value rule, numbered for this sync period. */
export interface BoundCheck {
  readonly min: number;
  readonly below: number;
  readonly check: number;
}

/** One launch of the norm + RoPE kernel over [T, L, 2*H*D] into [L, outRows, H, D] destinations. */
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
  readonly kNormWeight: number;
  readonly weightIsF32: boolean;
  readonly eps: number;
  readonly angles: Angles;
  readonly positions: number;
  readonly positionsAreI64: boolean;
  readonly positionRule: BoundCheck;
  /** Pools: token t goes to row slots[t] (negative: skipped; of tokens naming one slot, the last). */
  readonly slots?: { readonly ptr: number; readonly areI64: boolean; readonly rule: BoundCheck };
  readonly kOut: number;
  readonly vOut: number;
  readonly outRows: number;
}

/** Numbers a value rule the contracts left to the device; a rule the host already checked never fires. */
export function boundCheck(kernels: CudaKernels, checks: readonly DeviceCheck[], arg: string, dims: Readonly<Record<string, number>>, fallback: { min: number; below: number }): BoundCheck {
  const rule = checks.find((c) => c.arg === arg);
  if (!rule) return { ...fallback, check: 0xffffffff };
  return {
    min: rule.min ?? -Infinity,
    below: rule.below ?? Infinity,
    check: kernels.badValues.enqueue(rule, dims),
  };
}

/** Enqueues the norm + RoPE (after claim_slots when writing pools at slots). */
export function launchNormRope(kernels: CudaKernels, job: NormRopeJob): void {
  if (job.T === 0) return;
  const cx = kernels.cx;
  const plan = planRows({
    dtype: job.dtype,
    headDim: job.D,
    rotaryDim: job.R,
    gptj: job.gptj,
    tokens: job.T,
    headRows: job.L * job.H,
    vectorAddresses: [job.kv, job.kNormWeight, job.kOut, job.vOut],
    multiprocessors: cx.multiprocessors,
  });
  // Numbered before the claim pass: a bad slot is reported whatever else happens to the token.
  const claims = job.slots ? kernels.slotOwners.claim(job.slots.ptr, job.slots.areI64, job.T, job.slots.rule.below, job.op) : undefined;
  const cache = 'cache' in job.angles ? job.angles : undefined;
  const p = kernels.params.normRope;
  p.set('kv', job.kv)
    .set('kNormWeight', job.kNormWeight)
    .set('eps', job.eps)
    .set('cosSinCache', cache ? cache.cache : 0)
    .set('ropeFrequencies', 'ropeFrequencies' in job.angles ? job.angles.ropeFrequencies : 0)
    .set('positions', job.positions)
    .set('slots', job.slots ? job.slots.ptr : 0)
    .set('kOut', job.kOut)
    .set('vOut', job.vOut)
    .set('badValue', kernels.badValues.record.ptr)
    .set('numTokens', job.T)
    .set('numLayers', job.L)
    .set('numKvHeads', job.H)
    .set('headDim', job.D)
    .set('rotaryDim', job.R)
    .set('outRows', job.outRows)
    .set('gptj', job.gptj ? 1 : 0)
    .set('weightIsF32', job.weightIsF32 ? 1 : 0)
    .set('cacheDType', cache ? FLOAT_CODE[cache.cacheDType] : 0)
    .set('positionsAreI64', job.positionsAreI64 ? 1 : 0)
    .set('slotsAreI64', job.slots?.areI64 ? 1 : 0)
    .set('positionMin', job.positionRule.min)
    .set('positionBelow', job.positionRule.below)
    .set('positionCheck', job.positionRule.check)
    .set('slotBelow', job.slots ? job.slots.rule.below : Infinity)
    .set('slotCheck', job.slots ? job.slots.rule.check : 0xffffffff)
    .set('slotOwners', claims ? claims.table : 0)
    .set('slotOwnersMask', claims ? claims.mask : 0)
    .set('generation', claims ? claims.generation : 0)
    .set('tokensPerBlock', plan.tokensPerBlock)
    .set('headRowsPerBlock', plan.headRowsPerBlock)
    .set('lanesPerRow', plan.lanesPerRow);
  cx.launch(fusedKernel(job.dtype, plan.path), p, plan.gridX, plan.gridY, plan.block, plan.sharedBytes, job.op);
}
