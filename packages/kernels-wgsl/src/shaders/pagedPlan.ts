/**
 * The shape decisions of pagedAttention and copySlots in one place: rows per
 * pass, tile, lanes, read units, and how a call's cached tokens are split.
 * The split is chosen from what the host knows without reading the offsets
 * (B, C, H): spans of `tokensPerSplit` entries of kvSlots, so that the pieces
 * give the GPU `targetWorkgroups` workgroups when the requests alone do not.
 */
import type { IndexDType } from '@kvkit/contracts';
import type { CopySlotsPlan } from './copySlots.wgsl.js';
import { storedBytesOf } from './copySlots.wgsl.js';
import type { CheckSegmentsPlan, PagedAttentionMergePlan, PagedAttentionPlan } from './pagedAttention.wgsl.js';
import { poolRowUnits } from './pagedAttention.wgsl.js';
import type { DeviceCaps } from './plan.js';

export const pagedTuning = {
  /** Workgroups (piece, KV head) a call should have before it is split: a few per SM of a large GPU. */
  targetWorkgroups: 2048,
  /** A piece keeps at least this many tokens, so the merge and the partial rows stay small beside the K/V reads. */
  minTokensPerSplit: 256,
  /** Requests with at most this many queries (decode, verification) are split; longer ones spread their row tiles over their pieces instead. */
  splitQueries: 16,
  /** Query rows per pass over the tokens: each K/V row read serves this many (query, head) rows. */
  rowsPerPass: 8,
  /**
   * K rows for the logits: 'lanes' reads them as V is read (a row's lanes side by side, coalesced)
   * where a row's lanes fit a subgroup, 'row' one invocation a row; which is faster is for the GPU to say.
   */
  kRead: 'lanes' as 'lanes' | 'row',
  /**
   * With 'lanes' K reads, passes of at most this many rows run the online softmax in each group of a row's
   * lanes (`softmax: 'group'`), wider ones over the workgroup's tile: on the H200 the groups took decode
   * (4 rows) from 925 to 814 µs and verification (8 rows) from 5445 to 6773 µs.
   */
  groupSoftmaxRows: 4,
  /** Workgroups a (piece, KV head) may take side by side, one pass of rows each. */
  maxPassSlots: 8,
  /** Invocations per workgroup, one token each in the logit phase. */
  workgroupSize: 128,
  /** Bytes of partial results a call may use; past it the call is not split. */
  maxPartialBytes: 256 * 2 ** 20,
};

function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/** What a call fixes of its attention plan: the dtypes, the layout and the head dims (valueDim: headDim where absent). */
export type PagedAttentionRequest = Pick<PagedAttentionPlan, 'qType' | 'poolType' | 'layout' | 'headDim' | 'qIndptrType' | 'kvIndptrType' | 'slotType'> & { readonly valueDim?: number };

/**
 * `rowsPerRequest`: a request's query rows on average, N / B · Hq / H (the
 * offsets are on the device). A pass carries the next power of two of it, up
 * to `rowsPerPass`: decode with 4 query heads a group carries 4 rows, with no
 * work spent on empty ones.
 */
export function planPagedAttention(caps: DeviceCaps, r: PagedAttentionRequest, rowsPerRequest: number): PagedAttentionPlan {
  const valueDim = r.valueDim ?? r.headDim;
  const units = poolRowUnits(r.poolType, r.headDim, valueDim);
  const valueUnits = valueDim / units.elements;
  const workgroupSize = Math.min(pagedTuning.workgroupSize, caps.maxInvocationsPerWorkgroup);
  const lanes = Math.min(workgroupSize, nextPowerOfTwo(valueUnits));
  // The pass's q rows and tile in workgroup memory: wide heads (MLA's 576) carry fewer rows.
  let rowsPerPass = Math.min(pagedTuning.rowsPerPass, nextPowerOfTwo(Math.max(1, Math.ceil(rowsPerRequest))));
  const workgroupBytes = (rows: number) => 4 * (rows * r.headDim + rows * workgroupSize + workgroupSize + 4 * rows) + 48;
  while (rowsPerPass > 1 && workgroupBytes(rowsPerPass) > caps.maxWorkgroupStorageBytes) rowsPerPass /= 2;
  // Lanes need a row's lanes in one subgroup.
  const kRead = pagedTuning.kRead === 'lanes' && caps.subgroups && lanes > 1 && lanes <= caps.subgroupMinSize ? 'lanes' : 'row';
  return {
    kernel: 'pagedAttention',
    f16: caps.f16,
    ...r,
    valueDim,
    units,
    workgroupSize,
    rowsPerPass,
    lanes,
    unitsPerLane: Math.ceil(valueUnits / lanes),
    keyUnitsPerLane: Math.ceil(units.perRow / lanes),
    atomicOut: r.qType !== 'f32' && valueDim % 2 === 1,
    tileMax: caps.subgroups ? 'subgroup' : 'atomic',
    kRead,
    softmax: kRead === 'lanes' && rowsPerPass <= pagedTuning.groupSoftmaxRows ? 'group' : 'tile',
  };
}

/**
 * Workgroups per (piece, KV head): as many as a request's passes of rows on
 * average (verification: 8 queries at Hq / H = 4 are 32 rows, 4 passes of 8),
 * adjacent in the grid, so they run together and all but the first read the
 * piece's K/V rows from L2; decode keeps one.
 */
export function pagedPassSlots(rowsPerRequest: number, rowsPerPass: number): number {
  return Math.max(1, Math.min(pagedTuning.maxPassSlots, Math.ceil(rowsPerRequest / rowsPerPass)));
}

export function planPagedAttentionMerge(caps: DeviceCaps, r: PagedAttentionRequest): PagedAttentionMergePlan {
  return {
    kernel: 'pagedAttentionMerge',
    f16: caps.f16,
    qType: r.qType,
    // The merge writes rows of the output: V's width.
    headDim: r.valueDim ?? r.headDim,
    qIndptrType: r.qIndptrType,
    kvIndptrType: r.kvIndptrType,
    atomicOut: r.qType !== 'f32' && (r.valueDim ?? r.headDim) % 2 === 1,
    workgroupSize: Math.min(64, caps.maxInvocationsPerWorkgroup),
  };
}

export function planCheckSegments(caps: DeviceCaps, qIndptrType: IndexDType, kvIndptrType: IndexDType): CheckSegmentsPlan {
  return { kernel: 'checkSegments', qIndptrType, kvIndptrType, workgroupSize: Math.min(256, caps.maxInvocationsPerWorkgroup) };
}

/** How a call's tokens are split: the span of kvSlots a piece covers, the pieces per KV head, and whether any request may be split. */
export interface PagedSplit {
  readonly tokensPerSplit: number;
  readonly pieces: number;
  readonly splitQueries: number;
  /** Floats of partial results (outputs, then log-sum-exps); 0 where no request is split. */
  readonly partialFloats: number;
}

export function pagedSplit(dims: { readonly N: number; readonly Hq: number; readonly H: number; readonly D: number; readonly C: number; readonly B: number; readonly Dv?: number }, maxBytes: number): PagedSplit {
  const { N, Hq, H, C, B } = dims;
  // Partial rows hold outputs: V's width.
  const D = dims.Dv ?? dims.D;
  const whole = { tokensPerSplit: Math.max(C, 1), pieces: B + 1, splitQueries: 0, partialFloats: 0 };
  if (C === 0 || N === 0 || B * H >= pagedTuning.targetWorkgroups) return whole;
  // Whole tiles a piece, where pieces are at least a tile long.
  const step = Math.min(pagedTuning.workgroupSize, pagedTuning.minTokensPerSplit);
  const wanted = Math.ceil((C * H) / pagedTuning.targetWorkgroups / step) * step;
  const tokensPerSplit = Math.max(pagedTuning.minTokensPerSplit, wanted);
  const spans = Math.ceil(C / tokensPerSplit);
  if (spans <= 1) return whole;
  const splitQueries = Math.min(pagedTuning.splitQueries, N);
  const pieces = spans + B;
  const rows = pieces * splitQueries * Hq;
  const partialFloats = rows * (D + 1);
  if (partialFloats * 4 > Math.min(maxBytes, pagedTuning.maxPartialBytes)) return whole;
  return { tokensPerSplit, pieces, splitQueries, partialFloats };
}

export function planCopySlots(caps: DeviceCaps, r: Omit<CopySlotsPlan, 'kernel' | 'f16' | 'wholeWords' | 'workgroupSize'>, D: number): CopySlotsPlan {
  return { kernel: 'copySlots', f16: caps.f16, ...r, wholeWords: (D * storedBytesOf(r.dstType)) % 4 === 0, workgroupSize: Math.min(256, caps.maxInvocationsPerWorkgroup) };
}
