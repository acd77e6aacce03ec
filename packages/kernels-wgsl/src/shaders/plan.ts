/**
 * Every kernel-shape decision in one place: vector width, lanes per head row,
 * workgroup size, how a row's sum of squares is reduced, GEMM tiles. A plan is
 * plain data; its key names the pipeline in the cache, so two calls that plan
 * the same kernel share one compiled pipeline.
 */
import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { DuplicateRule } from '@kvkit/contracts/backend';
import { ROPE_ROWS } from '../generated/params.js';
import { elementBytes } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import type { Fp8ExactPath, PoolFormat } from './kvPoolRows.wgsl.js';
import type { CopySlotsPlan } from './copySlots.wgsl.js';
import type { CheckSegmentsPlan, PagedAttentionMergePlan, PagedAttentionPlan } from './pagedAttention.wgsl.js';
import type { PoolReadPlan, PoolStorePlan } from './poolStore.wgsl.js';
import type { MlaRowsPlan } from './mlaPoolFused.wgsl.js';

/** What the device offers that changes how kernels are built. */
export interface DeviceCaps {
  /** `subgroups` is enabled and its lanes are laid out in order within a workgroup (checked at start-up). */
  readonly subgroups: boolean;
  /** The smallest subgroup any pipeline may get; a row reduced within a subgroup must fit in it. */
  readonly subgroupMinSize: number;
  readonly maxWorkgroupStorageBytes: number;
  readonly maxInvocationsPerWorkgroup: number;
  /** Storage buffers one kernel may bind (8 by default in WebGPU; most GPUs offer more). */
  readonly maxStorageBuffersPerStage: number;
  /** How kernels convert f16: the builtins where the start-up probe found them exact. */
  readonly f16: F16Conversion;
}

export type RopeStyle = 'neox' | 'gptj';

/**
 * How one head row of D elements is read: as vectors of 1, 2 or 4 u32 words
 * (f32 bits, or two halves per word), or element by element where a 16-bit
 * row does not start on a word boundary (odd D).
 */
export interface RowLayout {
  readonly access: 'vector' | 'element';
  /** u32 words per vector (1 in element access, where a "vector" is one element). */
  readonly vecWords: 1 | 2 | 4;
  /** Elements per vector. */
  readonly elements: number;
  /** Vectors per head row. */
  readonly rowVecs: number;
}

export function rowLayout(dtype: FloatDType, D: number): RowLayout {
  const rowBytes = D * elementBytes(dtype);
  if (rowBytes % 4 !== 0) return { access: 'element', vecWords: 1, elements: 1, rowVecs: D };
  const words = rowBytes / 4;
  const vecWords = words % 4 === 0 ? 4 : words % 2 === 0 ? 2 : 1;
  return { access: 'vector', vecWords, elements: (vecWords * 4) / elementBytes(dtype), rowVecs: words / vecWords };
}

/**
 * Where the rotation partner of an element lives: in the same vector (gptj),
 * in the vector R/2 elements away (neox with R/2 a whole number of vectors),
 * or anywhere (read element by element).
 */
export type PartnerMode = 'local' | 'chunk' | 'element';

export function partnerMode(style: RopeStyle, R: number, layout: RowLayout): PartnerMode {
  if (layout.access === 'element') return 'element';
  if (style === 'gptj') return layout.elements % 2 === 0 ? 'local' : 'element';
  return (R / 2) % layout.elements === 0 ? 'chunk' : 'element';
}

function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * Defaults of the choices below, in one object so a benchmark can compare
 * variants in one run (plans, and so pipeline keys, follow it).
 */
export const tuning = {
  /** Invocations per workgroup of the norm + RoPE kernel (128 beat 256 and 512 on the H200 at T = 32768: 87% vs 80% of copy). */
  normRopeWorkgroup: 128,
  /** Invocations per workgroup of the RoPE-only and table kernels. */
  rowWorkgroup: 256,
  /** Lanes that share one head row, at most this many: beyond it each lane takes several vectors. */
  maxLanesPerRow: 32,
  /** K step of the GEMM tile, halved until two buffers fit in workgroup memory (8 beat 16 on the H200: 57% vs 46% of the FMA ceiling). */
  gemmTileK: 8,
  /** Q/K-norm rows with neox over the whole row: a lane holds a vector and its rotation partner (see RopeNormRowsPlan.pairedLanes). */
  pairedNormLanes: true,
  /** fp8 codes the row kernels' fast path cannot tell: redone by the exact division in one loop per store of row vectors, per word, or per element (Fp8ExactPath). */
  fp8Exact: 'row' as Fp8ExactPath,
  /** RoPE into fp8 pools: V rows on lanes of their own ('split', RopeRowsPlan.valueLanes), or a row's K and V codes on one lane ('pair'). */
  fp8KvLanes: 'split' as 'pair' | 'split',
  /**
   * dequantizeKv: units (16-byte vectors of rows where D allows) an invocation has in flight per step of its grid-stride loop.
   * On the H200 (bf16 rows, N = 32768, H = 8, D = 128) 2 units and 4224 workgroups beat 4 and 1024: bf16 NHD 46.9 → 45.9 µs,
   * fp8e4m3 NHD 49.0 → 46.0 µs, fp8e4m3 HND 50.9 → 48.1 µs.
   */
  poolReadUnits: 2,
  /** dequantizeKv: workgroups at most (32 an SM of a 132-SM GPU; fp8 tables are filled once per workgroup). */
  poolReadWorkgroups: 4224,
  /** dequantizeKv of fp8: codes looked up in a workgroup table of each code's row bits ('table'), or decoded and scaled one by one ('bits'). */
  poolReadFp8: 'table' as 'table' | 'bits',
};

/** Where the cos/sin values of a token come from: the cache row at its position, or a per-token table row. */
export type RopeSource = 'cache' | 'tokenTable';

export interface NormRopeRequest {
  readonly kvType: FloatDType;
  readonly weightType: FloatDType;
  readonly cacheType: FloatDType;
  readonly positionType: IndexDType;
  /** Pool scatter (materializeInto) reads slots of this dtype; dense outputs need none. */
  readonly slotType: IndexDType | undefined;
  readonly D: number;
  readonly R: number;
  readonly style: RopeStyle;
  readonly ropeSource: RopeSource;
  /** eps words follow the weights in one buffer (the materializer's), freeing a binding. */
  readonly epsInWeights: boolean;
  /** The pools a scatter writes, where not NHD of the model dtype (the fp8 scales then follow eps in the weights buffer). */
  readonly pool?: PoolFormat;
}

export interface NormRopePlan extends NormRopeRequest {
  readonly kernel: 'normRope';
  readonly f16: F16Conversion;
  /** mRoPE: positions are [3, T] and every stream is checked; with a cache, pair j reads its stream's row. */
  readonly streams: boolean;
  readonly layout: RowLayout;
  readonly partner: PartnerMode;
  /** Lanes per head row (a power of two), vectors per lane, and how their partial sums meet. */
  readonly lanesPerRow: number;
  readonly vecsPerLane: number;
  readonly reduction: 'none' | 'subgroup' | 'workgroup';
  readonly workgroupSize: number;
}

/** How the lanes of a normed kernel share a head row: lanes per row, vectors per lane, the reduction, the workgroup. */
function rowLanes(caps: DeviceCaps, layout: RowLayout): Pick<NormRopePlan, 'lanesPerRow' | 'vecsPerLane' | 'reduction' | 'workgroupSize'> {
  const lanesPerRow = Math.min(nextPowerOfTwo(layout.rowVecs), tuning.maxLanesPerRow);
  const reduction = lanesPerRow === 1 ? 'none' : caps.subgroups && lanesPerRow <= caps.subgroupMinSize ? 'subgroup' : 'workgroup';
  return {
    lanesPerRow,
    vecsPerLane: Math.ceil(layout.rowVecs / lanesPerRow),
    reduction,
    workgroupSize: Math.max(lanesPerRow, Math.min(tuning.normRopeWorkgroup, caps.maxInvocationsPerWorkgroup)),
  };
}

export function planNormRope(caps: DeviceCaps, r: NormRopeRequest, streams = false): NormRopePlan {
  const layout = rowLayout(r.kvType, r.D);
  return { ...r, kernel: 'normRope', f16: caps.f16, streams, layout, partner: partnerMode(r.style, r.R, layout), ...rowLanes(caps, layout) };
}

export interface RopeRowsRequest {
  readonly dtype: FloatDType;
  readonly D: number;
  readonly R: number;
  readonly style: RopeStyle;
  /** 'q': rotate into a dense output; 'kv': rotate K into kRot and the pool, copy V into the pool at slots; 'all': both in one dispatch. */
  readonly kind: 'q' | 'kv' | 'all';
  readonly slotType: IndexDType | undefined;
  /** The pools the key part writes, where not NHD of the model dtype (the fp8 scales then follow the cos/sin rows). */
  readonly pool?: PoolFormat;
}

export interface RopeRowsPlan extends RopeRowsRequest {
  readonly kernel: 'ropeRows';
  readonly f16: F16Conversion;
  readonly layout: RowLayout;
  readonly partner: PartnerMode;
  /** One invocation per rotation pair of vectors (neox, whole vectors apart) instead of one per vector. */
  readonly pairs: boolean;
  /**
   * fp8 pools: each token's V rows follow its K rows as rows of their own, on lanes that store only V's
   * codes, so a key lane encodes only its rotated vectors (the dispatch has N × H rows more).
   */
  readonly valueLanes: boolean;
  readonly workgroupSize: number;
}

/** Invocations per head row of a RoPE-only plan. */
export function ropeRowUnits(plan: RopeRowsPlan): number {
  const E = plan.layout.elements;
  return plan.pairs ? plan.R / 2 / E + (plan.D - plan.R) / E : plan.layout.rowVecs;
}

/** Storage bindings of the one-dispatch RoPE + scatter kernel (its declared bindings with both parts on). */
export const ROPE_ALL_BINDINGS = ROPE_ROWS.bindings({ queries: true, keys: true, Row: 'u32', Dst: 'u32', Pool: 'u32' }).specs.length;

export function planRopeRows(caps: DeviceCaps, r: RopeRowsRequest): RopeRowsPlan {
  const layout = rowLayout(r.dtype, r.D);
  const partner = partnerMode(r.style, r.R, layout);
  const valueLanes = tuning.fp8KvLanes === 'split' && r.kind !== 'q' && r.pool?.fp8 !== undefined && layout.access === 'vector';
  return { ...r, kernel: 'ropeRows', f16: caps.f16, layout, partner, pairs: partner === 'chunk', valueLanes, workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup) };
}

/** Which rows a Q/K-norm dispatch handles: every part in one, or q, k and v apart where bindings are few. */
export interface RopeNormParts {
  readonly queries: boolean;
  readonly keys: boolean;
  readonly values: boolean;
}

export interface RopeNormRowsRequest extends RopeNormParts {
  readonly dtype: FloatDType;
  readonly D: number;
  readonly R: number;
  readonly style: RopeStyle;
  /** dtype of qNormWeight (q rows normed), or undefined (rotated only). */
  readonly queryWeight: FloatDType | undefined;
  readonly keyWeight: FloatDType | undefined;
  readonly slotType: IndexDType | undefined;
  /** The pools key and value rows go to, where not NHD of the model dtype (the fp8 scales then follow the cos/sin rows). */
  readonly pool?: PoolFormat;
}

export interface RopeNormRowsPlan extends RopeNormRowsRequest {
  readonly kernel: 'ropeNormRows';
  readonly f16: F16Conversion;
  readonly layout: RowLayout;
  readonly partner: PartnerMode;
  /** Lanes per head row, vectors per lane and how a row's sum of squares meets: as the norm + RoPE kernel decides. */
  readonly lanesPerRow: number;
  readonly vecsPerLane: number;
  readonly reduction: 'none' | 'subgroup' | 'workgroup';
  readonly workgroupSize: number;
  /**
   * A lane holds a vector of the row's first half and its rotation partner R/2 elements on (neox, R = D):
   * each row element is loaded once and each cos/sin read once for both, where a lane per vector
   * loaded its partner's vector a second time.
   */
  readonly pairedLanes: boolean;
}

export function planRopeNormRows(caps: DeviceCaps, r: RopeNormRowsRequest): RopeNormRowsPlan {
  const layout = rowLayout(r.dtype, r.D);
  const partner = partnerMode(r.style, r.R, layout);
  const pairs = layout.rowVecs / 2;
  const pairedLanes = tuning.pairedNormLanes && partner === 'chunk' && r.R === r.D && pairs >= 1 && nextPowerOfTwo(pairs) === pairs && pairs <= tuning.maxLanesPerRow;
  const lanes = pairedLanes ? pairedRowLanes(caps, pairs) : rowLanes(caps, layout);
  return { ...r, kernel: 'ropeNormRows', f16: caps.f16, layout, partner, ...lanes, pairedLanes };
}

/** Lanes of a row held as pairs: one lane per rotation pair of vectors, two vectors a lane. */
function pairedRowLanes(caps: DeviceCaps, pairs: number): Pick<NormRopePlan, 'lanesPerRow' | 'vecsPerLane' | 'reduction' | 'workgroupSize'> {
  const reduction = pairs === 1 ? 'none' : caps.subgroups && pairs <= caps.subgroupMinSize ? 'subgroup' : 'workgroup';
  return { lanesPerRow: pairs, vecsPerLane: 2, reduction, workgroupSize: Math.max(pairs, Math.min(tuning.normRopeWorkgroup, caps.maxInvocationsPerWorkgroup)) };
}

export interface RopeTablePlan {
  readonly kernel: 'ropeTable';
  readonly positionType: IndexDType;
  readonly workgroupSize: number;
}

export function planRopeTable(caps: DeviceCaps, positionType: IndexDType): RopeTablePlan {
  return { kernel: 'ropeTable', positionType, workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup) };
}

/** What a value rule checks, as the check shader tells them apart: index values of a dtype, or f32 values at or above 0, or above it. */
export type ValueCheckKind = IndexDType | 'f32 >= 0' | 'f32 > 0';

/** The check of a call's value rules before its writing kernels (valueChecks.wgsl.ts): each rule's kind. */
export interface CheckValuesPlan {
  readonly kernel: 'checkValues';
  readonly valueTypes: readonly ValueCheckKind[];
  readonly workgroupSize: number;
}

export function planCheckValues(caps: DeviceCaps, valueTypes: CheckValuesPlan['valueTypes']): CheckValuesPlan {
  return { kernel: 'checkValues', valueTypes, workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup) };
}

/** One dispatch of the ownership pass before a pool scatter (slotOwners.wgsl.ts). */
export interface SlotOwnersPlan {
  readonly kernel: 'slotOwners';
  /** claim, then resolve, over the owner table; local: both in one workgroup of at least the call's tokens, no table. */
  readonly stage: 'claim' | 'resolve' | 'local';
  readonly rule: DuplicateRule;
  readonly slotType: IndexDType;
  /** The claim of a copy: the dtype of the source slots, a negative one of which skips its pair (it claims nothing). */
  readonly skipType?: IndexDType;
  readonly workgroupSize: number;
}

export function planSlotOwners(caps: DeviceCaps, stage: SlotOwnersPlan['stage'], rule: DuplicateRule, slotType: IndexDType, skipType?: IndexDType): SlotOwnersPlan {
  const skips = stage !== 'resolve' && skipType !== undefined ? { skipType } : {};
  return { kernel: 'slotOwners', stage, rule, slotType, ...skips, workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup) };
}

export interface GemmPlan {
  readonly kernel: 'gemm';
  readonly dtype: FloatDType;
  readonly f16: F16Conversion;
  /** Rows of C per workgroup tile (16 threads down, tileM / 16 rows each). */
  readonly tileM: number;
  /** Columns of C per workgroup tile (16 threads across, 8 columns each). */
  readonly tileN: number;
  /** K step held in workgroup memory per tile, double-buffered. */
  readonly tileK: number;
  /** Rows of A and W start on 16-byte boundaries: one vec4<u32> load per 16 bytes; else element loads. */
  readonly vectorLoads: boolean;
  /** Split-K: write f32 partial sums, added and rounded by the reduce kernel. */
  readonly partial: boolean;
}

export interface GemmReducePlan {
  readonly kernel: 'gemmReduce';
  readonly dtype: FloatDType;
  readonly f16: F16Conversion;
  readonly workgroupSize: number;
}

/** Workgroups a GEMM should have to fill a large GPU; fewer tiles than this split K. */
const GEMM_TARGET_WORKGROUPS = 512;
/** Each split keeps at least this many K steps, so the extra pass stays small. */
const GEMM_MIN_STEPS_PER_SPLIT = 8;

/** How many ways to split K, and the K length of a split (a whole number of tile steps). */
export function gemmSplits(plan: GemmPlan, shape: { M: number; N: number; K: number }): { splits: number; kPerSplit: number } {
  const tiles = Math.ceil(shape.M / plan.tileM) * Math.ceil(shape.N / plan.tileN);
  const steps = Math.ceil(shape.K / plan.tileK);
  let splits = Math.min(32, Math.ceil(GEMM_TARGET_WORKGROUPS / tiles), Math.floor(steps / GEMM_MIN_STEPS_PER_SPLIT));
  if (tiles >= GEMM_TARGET_WORKGROUPS || splits < 2) return { splits: 1, kPerSplit: steps * plan.tileK };
  const kPerSplit = Math.ceil(steps / splits) * plan.tileK;
  splits = Math.ceil(shape.K / kPerSplit);
  return { splits, kPerSplit };
}

export function planGemmReduce(caps: DeviceCaps, dtype: FloatDType): GemmReducePlan {
  return { kernel: 'gemmReduce', dtype, f16: caps.f16, workgroupSize: Math.min(256, caps.maxInvocationsPerWorkgroup) };
}

export function planGemm(caps: DeviceCaps, dtype: FloatDType, shape: { T: number; K: number }, partial = false): GemmPlan {
  const tileN = 128;
  // Few tokens: a short tile, so a decode-sized call does not pay for 128 rows.
  const tileM = shape.T <= 16 ? 16 : shape.T <= 32 ? 32 : shape.T <= 64 ? 64 : 128;
  let tileK = tuning.gemmTileK;
  while (tileK > 4 && 2 * tileK * (tileM + tileN) * 4 > caps.maxWorkgroupStorageBytes) tileK /= 2;
  return { kernel: 'gemm', dtype, f16: caps.f16, tileM, tileN, tileK, vectorLoads: (shape.K * elementBytes(dtype)) % 16 === 0 && tileK % (16 / elementBytes(dtype)) === 0, partial };
}

export interface CopyPlan {
  readonly kernel: 'copy';
  readonly workgroupSize: number;
  readonly vectorsPerInvocation: number;
}

export interface FmaPlan {
  readonly kernel: 'fma';
  readonly workgroupSize: number;
  readonly steps: number;
}

export function planCopy(caps: DeviceCaps, vectorsPerInvocation: number): CopyPlan {
  return { kernel: 'copy', workgroupSize: Math.min(256, caps.maxInvocationsPerWorkgroup), vectorsPerInvocation };
}

export function planFma(caps: DeviceCaps): FmaPlan {
  return { kernel: 'fma', workgroupSize: Math.min(256, caps.maxInvocationsPerWorkgroup), steps: 1024 };
}

/** The copy behind views: one 32-bit element a word, or two 16-bit ones, or four fp8 bytes (stridedCopy.wgsl.ts). */
export interface StridedCopyPlan {
  readonly kernel: 'stridedCopy';
  /** Elements per 32-bit word. */
  readonly lanes: 1 | 2 | 4;
  readonly workgroupSize: number;
}

export function planStridedCopy(caps: DeviceCaps, lanes: 1 | 2 | 4): StridedCopyPlan {
  return { kernel: 'stridedCopy', lanes, workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup) };
}

export type KernelPlan = CheckValuesPlan | NormRopePlan | RopeRowsPlan | RopeNormRowsPlan | RopeTablePlan | SlotOwnersPlan | PoolStorePlan | PoolReadPlan | GemmPlan | GemmReducePlan | CopyPlan | FmaPlan | StridedCopyPlan | PagedAttentionPlan | PagedAttentionMergePlan | CheckSegmentsPlan | CopySlotsPlan | MlaRowsPlan;

/** The pipeline cache key of a plan: every field that shapes the generated WGSL. */
export function planKey(plan: KernelPlan): string {
  return JSON.stringify(plan);
}
