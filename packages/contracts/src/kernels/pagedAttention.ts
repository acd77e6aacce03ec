/**
 * The kernels behind pagedAttention and copySlots, and the check of their
 * offsets rules (indptr) on the device. Each backend lists them in
 * `cudaKernels` / `wgslKernels` with the kernels that implement them.
 */
import { FLOAT_DTYPES } from '../tensor.js';
import { cudaKernel, f32, f64, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import { callFlag } from './valueChecks.js';

/**
 * How a kernel reads K/V rows of a pool of either layout and dtype: the
 * geometry of kv_pool.cuh's poolElement, and fp8 decoding as dequantizeKv
 * does it (the code's value times the head's scale, rounded to f32).
 */
const poolReadFields = {
  poolHeadMajor: i64('1: pools are HND [numPages, H, pageSize, D]; 0: NHD [S, H, D]'),
  poolPageSize: i64('rows per page of an HND pool (unused for NHD)'),
  poolDType: i64("0: q's dtype (values as stored), 1: fp8e4m3, 2: fp8e5m2 (decode(code) * scale in f32)"),
  kScale: input('float', "the K pool's scale where fp8: [1] or [H]; null otherwise"),
  vScale: input('float', "the V pool's scale where fp8: [1] or [H]; null otherwise"),
  kScalePerHead: i64('1: kScale is [H], 0: [1]'),
  vScalePerHead: i64('1: vScale is [H], 0: [1]'),
} as const;

/**
 * Launches of the attention kernel. `tiles*` (f16 and bf16 q): a block of four warps stages
 * tiles of `tileTokens` K/V rows in shared memory (cp.async, `stages` deep), rows of up to
 * `headDim` elements (any smaller D padded with zeros), and runs q·k and p·v on tensor cores,
 * up to `rowsPerPass` query rows a pass (q's fragments in registers, or with
 * `queryInShared` read from shared memory at each use); where vHeadDim < D they compute V's
 * whole rows and store the first vHeadDim. `lanes*` (f32 q, and every dtype past 256, MLA's latent rows):
 * each warp's lanes hold a row's elements, `rowsPerPass` query rows a pass, `tokensPerStep` K/V rows in
 * flight a warp. `decode*` (f16 and bf16 q, D <= headDim): requests of at most `rowsPerPass` rows
 * (qLen · Hq / H: decode, and two queries of a group of four): each warp its own `stages`-deep
 * cp.async pipeline of 16-token steps and Sᵀ = K·qᵀ on tensor cores, the rows as the mma's 8 columns.
 */
const attentionLaunches = {
  tiles64: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 64, tileTokens: 64, stages: 3, rowsPerPass: 64, queryInShared: false }, doc: 'f16/bf16, D <= 64' },
  tiles128: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 128, tileTokens: 64, stages: 3, rowsPerPass: 64, queryInShared: false }, doc: 'f16/bf16, 64 < D <= 128' },
  tiles256: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 256, tileTokens: 32, stages: 2, rowsPerPass: 64, queryInShared: true }, doc: 'f16/bf16, 128 < D <= 256 (q staged in shared memory)' },
  decode64: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 64, stages: 4, rowsPerPass: 8 }, doc: 'f16/bf16 decode, D <= 64' },
  decode128: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 128, stages: 3, rowsPerPass: 8 }, doc: 'f16/bf16 decode, 64 < D <= 128' },
  lanes64: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 64, rowsPerPass: 8, tokensPerStep: 4 }, doc: 'f32, D <= 64' },
  lanes128: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 128, rowsPerPass: 8, tokensPerStep: 4 }, doc: 'f32, 64 < D <= 128' },
  lanes256: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 256, rowsPerPass: 4, tokensPerStep: 2 }, doc: 'f32, 128 < D <= 256' },
  lanes576: { threads: 128, minBlocksPerSM: 2, constants: { headDim: 576, rowsPerPass: 2, tokensPerStep: 2 }, doc: 'every dtype, 256 < D <= 576 (MLA latent rows: D = 576, vHeadDim = 512)' },
};

const attentionEntries = [
  ...(['f16', 'bf16'] as const).flatMap((dtype) => ([64, 128, 256] as const).map((d) => ({ name: `paged_attention_${dtype}_d${d}`, launch: `tiles${d}`, dtype }))),
  ...(['f16', 'bf16'] as const).flatMap((dtype) => ([64, 128] as const).map((d) => ({ name: `paged_attention_${dtype}_decode${d}`, launch: `decode${d}`, dtype }))),
  ...([64, 128, 256] as const).map((d) => ({ name: `paged_attention_f32_d${d}`, launch: `lanes${d}`, dtype: 'f32' as const })),
  ...FLOAT_DTYPES.map((dtype) => ({ name: `paged_attention_${dtype}_d576`, launch: 'lanes576', dtype })),
];

export const pagedAttentionCuda = cudaKernel({
  kernel: 'pagedAttention',
  struct: 'PagedAttentionParams',
  doc: "pagedAttention: per (piece, KV head, pass slot), the online softmax of the scaled, capped, masked logits of up to rowsPerPass (query, head of the group) rows of the piece's request over the piece's K/V rows; into out/lse where the request is not split, else normalised into partial rows for the merge (paged_attention.cu). A piece is a request's run of at most tokensPerSplit cached tokens: request b's pieces are kvIndptr[b] / tokensPerSplit + b + k for k < ceil(kvLen / tokensPerSplit), so floor(C / tokensPerSplit) + B pieces cover any call.",
  params: {
    q: input('void', '[N, Hq, D]: row (n, h) at n*qTokenStride + h*qHeadStride, elements contiguous'),
    qTokenStride: i64('elements between tokens of q'),
    qHeadStride: i64('elements between heads of q'),
    kPool: input('void', '[S, H, D] or [numPages, H, pageSize, D]'),
    vPool: input('void', "kPool's layout and dtype"),
    ...poolReadFields,
    qIndptr: input('void', '[B + 1]: request b has queries [qIndptr[b], qIndptr[b + 1])'),
    kvIndptr: input('void', '[B + 1]: request b has cached tokens kvSlots[kvIndptr[b] .. kvIndptr[b + 1])'),
    kvSlots: input('void', '[C]: the pool slot of each cached token, in position order per request'),
    indptrAreI64: i64('bit 0: qIndptr is i64, bit 1: kvIndptr is i64 (0: i32)'),
    slotsAreI64: i64('1: kvSlots is i64, 0: i32'),
    out: output('void', "[N, Hq, Dv] contiguous, q's dtype; rows of split requests are the merge's to write"),
    lse: output('float', "[N, Hq] natural log-sum-exp; rows of split requests are the merge's to write"),
    partialOut: output('float', "[pieces, splitQueries, Hq, Dv] f32: row (piece, i, hq) is query i of the piece's request, normalised by the piece's sum; or null (no request split)"),
    partialLse: output('float', '[pieces, splitQueries, Hq] f32: the log-sum-exp of each partial row (-inf where the piece sees no token), or null'),
    badValue: input('BadValueRecord', "where the call's value checks left their verdict (check_values, check_segments)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    numTokens: i64('N'),
    numRequests: i64('B'),
    numQoHeads: i64('Hq'),
    numKvHeads: i64('H'),
    headDim: i64('D: the values of q and of each K row that q·k reads'),
    vHeadDim: i64('Dv <= D: the first Dv values of each V row (MLA: kv_lora_rank), the width of out'),
    slotBelow: i64('S: a slot at or past it (or negative) is read as zeros (the call is rejected anyway)'),
    causal: i64('1: query i of a request sees tokens 0 .. kvLen - qLen + i; 0: all kvLen'),
    slidingWindow: i64('0: none; w: query i sees only tokens after kvLen - qLen + i - w'),
    scale: f64('factor of q·k (1 / sqrt(D) by default)'),
    logitSoftcap: f64('0: none; cap: cap · tanh(logit / cap)'),
    tokensPerSplit: i64('cached tokens a piece covers at most (at least 1)'),
    splitQueries: i64('a request of more than one piece and at most this many queries is split: its pieces write partial rows; others spread their passes of rows over their pieces'),
    passSlots: i64('blocks per (piece, KV head): block (piece · H + h) · passSlots + s of the 1-D grid takes passes s, s + passSlots, ... of its share'),
    decodeRows: i64('requests of at most this many rows (qLen · Hq / H) are the decode launch\'s, the others the tiles launch\'s: the decode launch skips requests of more, the tiles launch those of at most (0: no decode launch)'),
  },
  launches: attentionLaunches,
  entries: attentionEntries,
});

export const pagedAttentionMergeCuda = cudaKernel({
  kernel: 'pagedAttentionMerge',
  struct: 'PagedAttentionMergeParams',
  doc: "pagedAttention, split requests: merges each query's partial rows by their log-sum-exp, out = Σ_k exp(lse_k - lse) · out_k with lse = log Σ_k exp(lse_k) (paged_attention.cu).",
  params: {
    partialOut: input('float', '[pieces, splitQueries, Hq, Dv], as the attention launch wrote it'),
    partialLse: input('float', '[pieces, splitQueries, Hq]'),
    qIndptr: input('void', '[B + 1]'),
    kvIndptr: input('void', '[B + 1]: the pieces of a request follow from its offsets'),
    indptrAreI64: i64('bit 0: qIndptr is i64, bit 1: kvIndptr is i64'),
    out: output('void', "[N, Hq, Dv], q's dtype"),
    lse: output('float', '[N, Hq]'),
    badValue: input('BadValueRecord', "the call's verdict"),
    call: i64("this call's number (0: no value check)"),
    numTokens: i64('N'),
    numRequests: i64('B'),
    numQoHeads: i64('Hq'),
    vHeadDim: i64('Dv: the width of out and of the partial rows'),
    tokensPerSplit: i64('as the attention launch had it'),
    splitQueries: i64('as the attention launch had it'),
  },
  launches: { default: { threads: 128, doc: 'a warp per (token, query head), Dv elements across its lanes' } },
  entries: FLOAT_DTYPES.map((dtype) => ({ name: `paged_attention_merge_${dtype}`, launch: 'default', dtype })),
});

export const copySlotsCuda = cudaKernel({
  kernel: 'copySlots',
  struct: 'CopySlotsParams',
  doc: "copySlots: the K and V rows of each pair's source slot into its destination slot, every head, bytes as they are where dtype and scale agree, else decoded and re-encoded (copy_slots.cu). Of the pairs naming one destination that are not skipped, the last writes it (claim); where source and destination share storage, stage first copies the source rows out and the copy reads them from there.",
  params: {
    kSrc: input('void', 'source K pool, either layout'),
    vSrc: input('void', "source V pool, kSrc's layout and dtype"),
    kDst: output('void', 'destination K pool, either layout'),
    vDst: output('void', "destination V pool, kDst's layout and dtype"),
    kSrcScale: input('float', '[1] or [H] where the source is fp8, else null'),
    vSrcScale: input('float', '[1] or [H] where the source is fp8, else null'),
    kDstScale: input('float', '[1] or [H] where the destination is fp8, else null'),
    vDstScale: input('float', '[1] or [H] where the destination is fp8, else null'),
    scalesPerHead: i64('bit 0: kSrcScale [H], bit 1: vSrcScale, bit 2: kDstScale, bit 3: vDstScale (0: [1])'),
    fromSlots: input('void', '[M]'),
    toSlots: input('void', '[M]'),
    slotsAreI64: i64('bit 0: fromSlots is i64, bit 1: toSlots is i64'),
    staging: output('void', '[M, 2, H, D] rows in the source dtype (stage writes, the copy reads), or null: read the source in place'),
    slotOwners: output('SlotOwner', 'winners of duplicate destination slots (claim writes, the copy reads), or null: M <= 1'),
    slotOwnersMask: i64('slot-owner table capacity - 1'),
    generation: i64("this call's generation in the slot-owner table"),
    badValue: input('BadValueRecord', "where the call's value check left its verdict (check_values)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    numPairs: i64('M'),
    numKvHeads: i64('H'),
    headDim: i64('D'),
    srcHeadMajor: i64('1: the source is HND, 0: NHD'),
    srcPageSize: i64('rows per page of an HND source'),
    srcDType: i64('FloatCode of a float source, 3: fp8e4m3, 4: fp8e5m2'),
    srcSlotBelow: i64('S'),
    dstHeadMajor: i64('1: the destination is HND, 0: NHD'),
    dstPageSize: i64('rows per page of an HND destination'),
    dstDType: i64('FloatCode of a float destination, 3: fp8e4m3, 4: fp8e5m2'),
    dstSlotBelow: i64('dstS'),
    vectors: i64('1: every row start is 16-byte aligned on both sides (and in staging), so rows kept as bits move 16 bytes a load'),
  },
  launches: {
    default: { threads: 256, doc: 'a warp per pair: its ownership looked up once, then its 2·H rows, 16 bytes or one element a lane at a time' },
    stage: { threads: 256, doc: 'a warp per pair: its source rows into staging, before any destination is written' },
    claim: { threads: 256, doc: 'one thread per pair: pairs that are not skipped claim their destination slot' },
  },
  entries: [
    { name: 'copy_slots', launch: 'default' },
    { name: 'copy_slots_stage', launch: 'stage' },
    { name: 'copy_slots_claim', launch: 'claim' },
  ],
});

/**
 * The offsets rules of one call (`DeviceSegmentCheck`), checked with its value
 * rules before any of its kernels read the tensors. A break is recorded in
 * BadValueRecord as the value rules are, with key (check << 32) | entry and
 * value `entry value · 4 + how` for an offsets rule (how: 0 entry 0 is not 0,
 * 1 below the entry before, 2 the last is not the total) or `qLen · 2^32 +
 * kvLen` for segmentsWithin (entry = the request); the host decodes it with
 * offsetsRuleError / segmentsWithinError. Check numbers follow the
 * contract's step order (qIndptr, kvIndptr, then segmentsWithin, then
 * kvSlots' value rule), so the first break the host would report is the one
 * recorded.
 */
export const checkSegmentsCuda = cudaKernel({
  kernel: 'checkSegments',
  struct: 'CheckSegmentsParams',
  doc: "One call's offsets rules (indptr), checked before its kernels run (check_segments.cu).",
  params: {
    qIndptr: input('void', '[B + 1]'),
    kvIndptr: input('void', '[B + 1]'),
    entries: i64('B + 1'),
    indptrAreI64: i64('bit 0: qIndptr is i64, bit 1: kvIndptr is i64'),
    qTotal: i64('N: the last entry of qIndptr'),
    kvTotal: i64('C: the last entry of kvIndptr'),
    qCheck: i64("check number of qIndptr's offsets rule (-1: checked on the host)"),
    kvCheck: i64("check number of kvIndptr's offsets rule (-1: checked on the host)"),
    withinCheck: i64('check number of the qLen <= kvLen rule (-1: checked on the host)'),
    badValue: output('BadValueRecord', 'where a break is recorded, and the call marked rejected'),
    call: i64("this call's number, stored in BadValueRecord.rejectedCall when a rule breaks"),
  },
  launches: { default: { threads: 256, doc: 'grid-stride over the entries: each compares its entry with the one before' } },
  entries: [{ name: 'check_segments', launch: 'default' }],
});

export const pagedAttentionWgsl = wgslKernel({
  kernel: 'pagedAttention',
  doc: "pagedAttention: per (piece, KV head, pass slot), a piece being a request's cached tokens within one span of tokensPerSplit of kvSlots, the online softmax of the request's queries and the Hq / H query heads of the KV head over the piece's rows; into out and lse where the request has one piece (or more than splitQueries queries), else into partial (pagedAttention.wgsl.ts).",
  uniforms: {
    tokens: u32('N'),
    requests: u32('B'),
    queryHeads: u32('Hq'),
    kvHeads: u32('H'),
    slotBelow: u32('S'),
    pageSize: u32('rows per page (HND); S for NHD'),
    qIndptrAt: u32('word of qIndptr[0] in indices'),
    kvIndptrAt: u32('word of kvIndptr[0] in indices'),
    kvSlotsAt: u32('word of kvSlots[0] in indices'),
    kScaleAt: u32('word of kScale[0] in indices (fp8 pools)'),
    kScaleStep: u32('1: kScale [H], 0: kScale [1]'),
    vScaleAt: u32('word of vScale[0] in indices'),
    vScaleStep: u32('1: vScale [H], 0: vScale [1]'),
    causal: u32('1: causal mask, 0: none'),
    slidingWindow: u32('0: none; w: only tokens after kvLen - qLen + i - w'),
    scale: f32('factor of q·k'),
    logitSoftcap: f32('0: none; cap: cap · tanh(logit / cap)'),
    tokensPerSplit: u32('span of kvSlots one piece covers at most'),
    splitQueries: u32('requests with at most this many queries (and two pieces or more) are split: rows of partial per piece'),
    pieces: u32('ceil(C / tokensPerSplit) + B: the pieces the grid covers per KV head'),
    passSlots: u32('workgroups per (piece, KV head), each taking every passSlots-th pass of R rows, side by side in the grid so they share the piece\'s rows in L2'),
    partialLseAt: u32('word of the first log-sum-exp in partial, after the outputs'),
    callFlag,
  },
  types: {
    KvRow: 'the unit a row is read in: vec4<u32>, vec2<u32> or u32 where rows allow',
    Out: 'u32, or atomic<u32> where half-words are stored one at a time (16-bit rows of odd D)',
  },
  bindings: {
    q: read('u32', '[N, Hq, D] contiguous, f32 bits or halves two a word'),
    kPool: read('KvRow', '[S, H, D] or [numPages, H, pageSize, D]'),
    vPool: read('KvRow', 'as kPool'),
    indices: read('u32', 'qIndptr, kvIndptr and kvSlots (i32 words, i64 two words each), then the fp8 scales (f32 bits), packed by copies before the call'),
    out: readWrite('Out', "[N, Hq, D], q's dtype"),
    lse: readWrite('f32', '[N, Hq]'),
    partial: readWrite('f32', "[pieces, splitQueries, Hq, D] outputs normalised by their piece's sum, then [pieces, splitQueries, Hq] log-sum-exps (-inf: the piece sees no token)"),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

export const pagedAttentionMergeWgsl = wgslKernel({
  kernel: 'pagedAttentionMerge',
  doc: "pagedAttention, split requests: each query's partial outputs merged by their log-sum-exp (pagedAttention.wgsl.ts).",
  uniforms: {
    tokens: u32('N'),
    requests: u32('B'),
    queryHeads: u32('Hq'),
    qIndptrAt: u32('word of qIndptr[0] in indices'),
    kvIndptrAt: u32('word of kvIndptr[0] in indices'),
    tokensPerSplit: u32('as the attention dispatch had it'),
    splitQueries: u32('as the attention dispatch had it'),
    pieces: u32('as the attention dispatch had it'),
    partialLseAt: u32('as the attention dispatch had it'),
    callFlag,
  },
  types: { Out: 'u32, or atomic<u32> where half-words are stored one at a time' },
  bindings: {
    partial: read('f32', 'as pagedAttention wrote it'),
    indices: read('u32', 'as pagedAttention read it'),
    out: readWrite('Out', "[N, Hq, D], q's dtype"),
    lse: readWrite('f32', '[N, Hq]'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

export const copySlotsWgsl = wgslKernel({
  kernel: 'copySlots',
  doc: "copySlots: K and V rows of each owned pair from the source pools to the destination, bytes as they are where dtype and scale agree, else decoded and re-encoded; one invocation per destination word of a (pair, K or V, head) row. Where source and destination share storage, a first dispatch stages each pair's source rows at row m of [M, H, D] staging pools and the copy reads them from there (copySlots.wgsl.ts).",
  uniforms: {
    units: u32('invocations: M * 2 * H * unitsPerRow'),
    unitsPerRow: u32('destination words of a head row (elements where rows share words)'),
    heads: u32('H'),
    headDim: u32('D'),
    fromBelow: u32('S: fromSlots at or past it (or negative) skip their pair'),
    toBelow: u32('dstS: the same for the owned toSlots'),
    srcPageSize: u32('rows per page of an HND source; S for NHD (staging: M)'),
    dstPageSize: u32('rows per page of an HND destination; dstS for NHD (staging: M)'),
    kSrcScaleAt: u32('word of kSrcScale[0] in scales (fp8 sources)'),
    vSrcScaleAt: u32('word of vSrcScale[0] in scales'),
    kDstScaleAt: u32('word of kDstScale[0] in scales (fp8 destinations)'),
    vDstScaleAt: u32('word of vDstScale[0] in scales'),
    scalesPerHead: u32('bit 0: kSrcScale [H], bit 1: vSrcScale, bit 2: kDstScale, bit 3: vDstScale (0: [1])'),
    callFlag,
  },
  types: { Dst: 'u32 where each invocation stores whole words, atomic<u32> where rows share words' },
  bindings: {
    kSrc: read('u32', 'source K pool'),
    vSrc: read('u32', 'source V pool'),
    fromSlots: read('u32', '[M] i32 words or i64 word pairs'),
    toSlots: read('u32', '[M]: the owned destination slots (a pair that does not own its slot reads -1, see slotOwners)'),
    scales: read('u32', 'the f32 bits of the fp8 scales the call has, packed by copies before it'),
    kDst: readWrite('Dst', 'destination K pool'),
    vDst: readWrite('Dst', 'destination V pool'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

export const checkSegmentsWgsl = wgslKernel({
  kernel: 'checkSegments',
  doc: "One call's offsets rules (indptr) in one dispatch beside checkValues: a break raises its rule's flag word to 0xffffffff - entry and the call's (pagedAttention.wgsl.ts).",
  uniforms: {
    entries: u32('B + 1'),
    qTotal: u32('N'),
    kvTotal: u32('C'),
    qFlag: u32("flag word of qIndptr's offsets rule"),
    kvFlag: u32("flag word of kvIndptr's offsets rule"),
    withinFlag: u32('flag word of the qLen <= kvLen rule'),
    callFlag,
  },
  bindings: {
    qIndptr: read('u32', '[B + 1] i32 words or i64 word pairs'),
    kvIndptr: read('u32', '[B + 1]'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

/** The kernels of the read side, for backends to add to their generated declarations as they implement them. */
export const pagedCudaKernels = [pagedAttentionCuda, pagedAttentionMergeCuda, copySlotsCuda, checkSegmentsCuda];
export const pagedWgslKernels = [pagedAttentionWgsl, pagedAttentionMergeWgsl, copySlotsWgsl, checkSegmentsWgsl];
