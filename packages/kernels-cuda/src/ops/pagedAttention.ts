import { attentionScale } from '@kvkit/contracts/backend';
import type { FloatDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { DeviceSegmentCheck, PagedAttentionChecked } from '@kvkit/contracts/backend';
import { LAUNCHES } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import type { KernelName } from '../runtime/kernelNames.js';
import { poolScales, poolWrite } from './kvPools.js';

type AttentionLaunch = keyof (typeof LAUNCHES)['pagedAttention'];
type AttentionKernel = Exclude<Extract<KernelName, `paged_attention_${string}`>, `paged_attention_merge_${string}`>;

/** The split rules of src/cuda/paged_attention.cu, as the host chooses them. */
export const pagedTuning = {
  /** A piece keeps at least this many tokens, so its partial rows and the merge stay small beside its K/V reads. */
  minTokensPerSplit: 256,
  /** Requests of at most this many queries (decode, verification) may be split over pieces; longer ones spread their passes of rows instead. */
  splitQueries: 16,
  /** Blocks a piece may take side by side, each every passSlots-th pass of rows. */
  maxPassSlots: 8,
  /** Bytes of partial rows a call may use; past it the call is split less. */
  maxPartialBytes: 256 * 2 ** 20,
  /** What one more piece a request costs, in waves of the grid: its set-up, its partial rows, the merge. */
  pieceCost: 0.003,
};

/** What a call's split depends on: its sizes, the rows a pass takes and the tile, and the blocks the GPU holds at once. */
export interface PagedShape {
  readonly B: number;
  readonly N: number;
  readonly C: number;
  readonly H: number;
  readonly Hq: number;
  readonly D: number;
  /** Values of each output row (vHeadDim), the width of the partial rows. */
  readonly Dv: number;
  readonly rowsPerPass: number;
  readonly tileTokens: number;
  /** Multiprocessors times the attention blocks each holds. */
  readonly slots: number;
}

/** How a call is laid over the grid: the span of a piece, which requests split, the blocks per piece, the grid's pieces and the partial rows. */
export interface PagedPlan {
  readonly tokensPerSplit: number;
  readonly splitQueries: number;
  readonly passSlots: number;
  /** floor(C / tokensPerSplit) + B: request b's pieces start at kvIndptr[b] / tokensPerSplit + b and end before the next request's. */
  readonly pieces: number;
  /** Rows of partialOut ([pieces, splitQueries, Hq]); 0: no request is split. */
  readonly partialRows: number;
}

/**
 * The split from what the host knows without reading the offsets (B, N, C): the pieces an average request
 * (C / B tokens) is cut into are those that fill the grid's waves best (blocks · share of a last wave), each
 * extra piece costing `pieceCost`; a request of kvLen tokens then has ceil(kvLen / tokensPerSplit) pieces
 * of whole tiles.
 */
export function planPagedAttention(s: PagedShape): PagedPlan {
  const group = s.Hq / s.H;
  const rowsPerRequest = s.B > 0 ? (s.N / s.B) * group : 0;
  const passSlots = Math.max(1, Math.min(pagedTuning.maxPassSlots, Math.ceil(rowsPerRequest / s.rowsPerPass)));
  const whole: PagedPlan = { tokensPerSplit: Math.max(s.C, 1), splitQueries: 0, passSlots, pieces: s.B + 1, partialRows: 0 };
  if (s.B === 0 || s.C === 0 || s.N === 0) return whole;
  const splitQueries = Math.min(pagedTuning.splitQueries, s.N);
  const average = s.C / s.B;
  const spanOf = (splits: number) => Math.ceil(Math.ceil(average / splits) / s.tileTokens) * s.tileTokens;
  const rowsOf = (span: number) => (Math.floor(s.C / span) + s.B) * splitQueries * s.Hq;
  const fits = (span: number) => rowsOf(span) * (s.Dv + 1) * 4 <= pagedTuning.maxPartialBytes;
  const most = Math.max(1, Math.floor(average / pagedTuning.minTokensPerSplit));
  let best = { splits: 1, score: -Infinity };
  for (let splits = 1; splits <= most; splits++) {
    const span = spanOf(splits);
    if (splits > 1 && !fits(span)) break;
    const blocks = s.B * s.H * passSlots * Math.ceil(average / span);
    const filled = blocks / (Math.ceil(blocks / s.slots) * s.slots);
    const score = filled - pagedTuning.pieceCost * (splits - 1);
    if (score > best.score) best = { splits, score };
  }
  const span = spanOf(best.splits);
  if (best.splits === 1 || span >= s.C) return whole;
  return { tokensPerSplit: span, splitQueries, passSlots, pieces: Math.floor(s.C / span) + s.B, partialRows: rowsOf(span) };
}

/**
 * The attention launch of a call: tensor-core tiles for f16/bf16 q, CUDA-core lanes for f32 and for rows
 * past 256 (MLA's latent rows) in every dtype; the smallest head dim of its kind that holds D.
 */
export function attentionLaunch(dtype: FloatDType, D: number): { readonly launch: AttentionLaunch; readonly kernel: AttentionKernel } {
  if (D > 256) return { launch: 'lanes576', kernel: `paged_attention_${dtype}_d576` };
  const width = D <= 64 ? 64 : D <= 128 ? 128 : 256;
  return { launch: `${dtype === 'f32' ? 'lanes' : 'tiles'}${width}`, kernel: `paged_attention_${dtype}_d${width}` };
}

/** Requests of at most this many rows (qLen · Hq / H) may take a decode launch. */
export const DECODE_ROWS = LAUNCHES.pagedAttention.decode128.rowsPerPass;

/**
 * The decode launch of a call, where there is one (f16/bf16 q, D <= 128, a query's rows of the group within
 * DECODE_ROWS, pools of fewer than 2³¹ rows S · H, which it numbers in 32 bits): the smallest head dim that holds D.
 */
export function decodeLaunch(dtype: FloatDType, D: number, group: number, poolRows: number): { readonly launch: AttentionLaunch; readonly kernel: AttentionKernel } | undefined {
  if (dtype === 'f32' || D > 128 || group > DECODE_ROWS || poolRows >= 2 ** 31) return undefined;
  const width = D <= 64 ? 64 : 128;
  return { launch: `decode${width}`, kernel: `paged_attention_${dtype}_decode${width}` };
}

/** The launches of a call, in order, and the rows (qLen · Hq / H) up to which a request is the decode launch's. */
export interface CallLaunches {
  readonly launches: readonly { readonly launch: AttentionLaunch; readonly kernel: AttentionKernel }[];
  /** The decodeRows parameter: Number.MAX_SAFE_INTEGER where decode takes every request, 0 where it does not run. */
  readonly decodeRows: number;
}

/**
 * Decode takes every request where they average at most DECODE_ROWS rows (a request of more goes by passes
 * of that many); otherwise, with more than one request, those of at most DECODE_ROWS rows, beside the tiles
 * or lanes launch that takes the rest. Without a decode launch (f32, D > 128, a wide group, huge pools) the
 * tiles or lanes launch takes them all.
 */
export function chooseLaunches(dtype: FloatDType, d: { readonly N: number; readonly B: number; readonly Hq: number; readonly H: number; readonly D: number; readonly S: number }): CallLaunches {
  const group = d.Hq / d.H;
  const decode = decodeLaunch(dtype, d.D, group, d.S * d.H);
  if (decode && d.N * group <= DECODE_ROWS * d.B) return { launches: [decode], decodeRows: Number.MAX_SAFE_INTEGER };
  if (decode && d.B > 1) return { launches: [attentionLaunch(dtype, d.D), decode], decodeRows: DECODE_ROWS };
  return { launches: [attentionLaunch(dtype, d.D)], decodeRows: 0 };
}

/** Dynamic shared memory of an attention launch, laid out as paged_attention.cu's TilesLayout, attendDecode and attendLanes place it. */
export function attentionSharedBytes(launch: AttentionLaunch, fp8: boolean): number {
  const WARPS = 4;
  const l = LAUNCHES.pagedAttention[launch];
  if ('stages' in l && !('tileTokens' in l)) {
    // Per warp: stages of 16-token K and V tiles (fp8: of codes, read straight into the mma operands).
    const tile16 = 16 * l.headDim * 2;
    const warp = l.stages * 2 * (fp8 ? 16 * l.headDim : tile16);
    const merge = (WARPS * l.rowsPerPass * (l.headDim + 4) + 2 * WARPS * l.rowsPerPass) * 4;
    return Math.max(WARPS * warp, merge) + (fp8 ? 256 * 2 : 0);
  }
  if (!('tileTokens' in l)) return WARPS * l.rowsPerPass * l.headDim * 4 + 2 * WARPS * l.rowsPerPass * 4 + (fp8 ? 256 * 4 : 0);
  const tile16 = l.tileTokens * l.headDim * 2;
  const stages = l.stages * 2 * (fp8 ? l.tileTokens * l.headDim : tile16);
  const decoded = fp8 ? 2 * tile16 : 0;
  const merge = WARPS * 16 * (l.headDim + 8) * 4 + 2 * WARPS * 16 * 4;
  const query = l.queryInShared ? l.rowsPerPass * l.headDim * 2 : 0;
  return Math.max(stages + decoded + query, merge) + l.stages * l.tileTokens * 8 + (fp8 ? 256 * 2 : 0);
}

/**
 * pagedAttention on the device: the call's value rules (fp8 scales, kvSlots) and offsets rules (check_segments)
 * checked first, in the contract's order, then one launch over (piece, KV head, pass slot) blocks and, where a
 * request may be split, the merge over (query, query head). q is read through its token and head strides;
 * the index tensors, scales and pools by index, contiguous (views among them are copied first).
 */
export function pagedAttention(kernels: CudaKernels, args: PagedAttentionChecked): { out: CudaTensor; lse: CudaTensor } {
  const op = 'pagedAttention';
  const { N, Hq, H, D, Dv, S, B1, C } = args.dims;
  const B = B1 - 1;
  const q = kernels.own(args.q);
  const dtype = q.dtype as FloatDType;
  const out = args.out ? kernels.own(args.out) : kernels.allocate(dtype, [N, Hq, Dv], op);
  const lse = kernels.allocate('f32', [N, Hq], op);
  const cx = kernels.cx;
  cx.makeCurrent();
  const kPool = kernels.own(args.kPool);
  const vPool = kernels.own(args.vPool);
  const qIndptr = kernels.own(args.qIndptr);
  const kvIndptr = kernels.own(args.kvIndptr);
  const kvSlots = kernels.own(args.kvSlots);
  const scales = [args.kScale, args.vScale].map((s) => (s ? kernels.own(s) : undefined));
  const present = scales.filter((s) => s !== undefined);
  const qInPlace = D === 1 || q.strides[2] === 1;
  const gathered = kernels.gather.contiguous([kPool, vPool, qIndptr, kvIndptr, kvSlots, ...present, ...(qInPlace ? [] : [q])], op);
  const [kPoolAt, vPoolAt, qIndptrAt, kvIndptrAt, kvSlotsAt] = gathered as [number, number, number, number, number];
  const [kScaleAt, vScaleAt] = poolScales(scales, gathered.slice(5, 5 + present.length));
  const qAt = qInPlace ? { ptr: q.ptr, token: N === 1 ? 0 : q.strides[0]!, head: q.strides[1]! } : { ptr: gathered[5 + present.length]!, token: Hq * D, head: D };
  const indptrAreI64 = (qIndptr.dtype === 'i64' ? 1 : 0) | (kvIndptr.dtype === 'i64' ? 2 : 0);

  // The checks in the contract's order: value rules before the offsets (the scales), the offsets, then kvSlots.
  const values: Readonly<Record<string, number | undefined>> = { kScale: kScaleAt?.ptr, vScale: vScaleAt?.ptr, kvSlots: kvSlotsAt };
  const segments = { qIndptr: -1, kvIndptr: -1, within: -1 };
  const numberSegments = () => {
    for (const check of args.deviceSegmentChecks) segments[segmentKey(check)] = kernels.badValues.enqueueSegment(check, args.dims);
  };
  let segmentsNumbered = false;
  for (const rule of args.deviceChecks) {
    if (rule.arg === 'kvSlots' && !segmentsNumbered) {
      numberSegments();
      segmentsNumbered = true;
    }
    const at = values[rule.arg];
    if (at === undefined) throw new Error(`${op}: no contiguous copy of ${rule.arg} for its device check`);
    kernels.badValues.enqueue(rule, args.dims, at);
  }
  if (!segmentsNumbered) numberSegments();
  const call = kernels.badValues.checkCall(op);
  if (args.deviceSegmentChecks.length > 0) {
    const { threads } = LAUNCHES.checkSegments.default;
    const p = kernels.params.checkSegments;
    p.write({
      qIndptr: qIndptrAt,
      kvIndptr: kvIndptrAt,
      entries: B1,
      indptrAreI64,
      qTotal: N,
      kvTotal: C,
      qCheck: segments.qIndptr,
      kvCheck: segments.kvIndptr,
      withinCheck: segments.within,
      badValue: kernels.badValues.record.ptr,
      call,
    });
    // Behind the value check, which waits for the work ahead; the attention waits for both.
    cx.launchOverlapping('check_segments', p, Math.max(1, Math.min(Math.ceil(B1 / threads), cx.multiprocessors * 4)), threads, 0, op);
  }
  if (N === 0) return { out, lse };

  const fp8 = isFp8(kPool.dtype as PoolDType);
  const { launches, decodeRows } = chooseLaunches(dtype, { N, B, Hq, H, D, S });
  const sized = launches.map(({ launch, kernel }) => {
    const sharedBytes = attentionSharedBytes(launch, fp8);
    cx.allowSharedBytes(kernel, sharedBytes, op);
    return { launch, kernel, sharedBytes, shape: LAUNCHES.pagedAttention[launch] };
  });
  // The plan is the first launch's: its rows a pass, its tile and the blocks the GPU holds of it.
  const main = sized[0]!;
  const resident = cx.residentBlocks(main.kernel, main.shape.threads, main.sharedBytes, op);
  const plan = planPagedAttention({ B, N, C, H, Hq, D, Dv, rowsPerPass: main.shape.rowsPerPass, tileTokens: 'tileTokens' in main.shape ? main.shape.tileTokens : 64, slots: cx.multiprocessors * resident });
  const partialLseAt = Math.ceil((plan.partialRows * Dv * 4) / 256) * 256;
  const partial = plan.partialRows > 0 ? kernels.pagedPartials.take(partialLseAt + plan.partialRows * 4, op).ptr : 0;
  const p = kernels.params.pagedAttention;
  p.write({
    q: qAt.ptr,
    qTokenStride: qAt.token,
    qHeadStride: qAt.head,
    kPool: kPoolAt,
    vPool: vPoolAt,
    ...poolWrite(args.layout, args.dims, kPool.dtype as PoolDType, [kScaleAt, vScaleAt]),
    qIndptr: qIndptrAt,
    kvIndptr: kvIndptrAt,
    kvSlots: kvSlotsAt,
    indptrAreI64,
    slotsAreI64: kvSlots.dtype === 'i64' ? 1 : 0,
    out: out.ptr,
    lse: lse.ptr,
    partialOut: partial,
    partialLse: partial === 0 ? 0 : partial + partialLseAt,
    badValue: kernels.badValues.record.ptr,
    call,
    numTokens: N,
    numRequests: B,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    vHeadDim: Dv,
    slotBelow: S,
    causal: args.causal ? 1 : 0,
    slidingWindow: args.slidingWindow ?? 0,
    scale: attentionScale(args.scale, D),
    logitSoftcap: args.logitSoftcap ?? 0,
    tokensPerSplit: plan.tokensPerSplit,
    splitQueries: plan.splitQueries,
    passSlots: plan.passSlots,
    decodeRows,
  });
  // Block (piece · H + h) · passSlots + slot: a piece's pass slots side by side, so they share its rows in L2.
  for (const { kernel, shape, sharedBytes } of sized) cx.launchOverlapping(kernel, p, plan.pieces * H * plan.passSlots, shape.threads, sharedBytes, op);
  if (plan.partialRows === 0) return { out, lse };
  const { threads } = LAUNCHES.pagedAttentionMerge.default;
  const m = kernels.params.pagedAttentionMerge;
  m.write({
    partialOut: partial,
    partialLse: partial + partialLseAt,
    qIndptr: qIndptrAt,
    kvIndptr: kvIndptrAt,
    indptrAreI64,
    out: out.ptr,
    lse: lse.ptr,
    badValue: kernels.badValues.record.ptr,
    call,
    numTokens: N,
    numRequests: B,
    numQoHeads: Hq,
    vHeadDim: Dv,
    tokensPerSplit: plan.tokensPerSplit,
    splitQueries: plan.splitQueries,
  });
  // A warp per (query, query head); it waits for the attention grid before reading the partial rows.
  cx.launchOverlapping(`paged_attention_merge_${dtype}`, m, Math.ceil((N * Hq) / (threads / 32)), threads, 0, op);
  return { out, lse };
}

function segmentKey(check: DeviceSegmentCheck): 'qIndptr' | 'kvIndptr' | 'within' {
  if (check.kind === 'segmentsWithin') return 'within';
  return check.arg === 'qIndptr' ? 'qIndptr' : 'kvIndptr';
}
