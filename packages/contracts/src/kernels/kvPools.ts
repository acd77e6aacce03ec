/** The kernels that store head rows into KV pools of any layout and dtype (fp8 with scales), and read them back. */
import { cudaKernel, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import { callFlag } from './valueChecks.js';

/**
 * What a row kernel that writes pools itself (ropeRows, ropeNormRows, normRope) needs of
 * them: the page size of HND pools, and where the fp8 scales lie in a buffer it already
 * binds (copied after its cos/sin rows or its eps words, so no binding is added).
 */
export const poolWriteUniforms = {
  pageSize: u32('rows per page (HND); unused for NHD'),
  kScaleAt: u32('word of kScale[0] in the buffer that holds the scales (fp8 pools)'),
  kScaleStep: u32('1: kScale [H], 0: kScale [1]'),
  vScaleAt: u32('word of vScale[0] there'),
  vScaleStep: u32('1: vScale [H], 0: vScale [1]'),
};

const poolStoreUniforms = {
  units: u32('invocations of the dispatch: layers × tokens × segments × units per segment'),
  tokens: u32('T: rows of the source per layer'),
  heads: u32('H'),
  headDim: u32('D'),
  segments: u32('destination runs per token: 1 (NHD, a whole [H, D] row) or H (HND, one per head)'),
  segmentUnits: u32('invocations per run: words (aligned) or elements'),
  slotBelow: u32('S'),
  pageSize: u32('rows per page (HND); S for NHD'),
  sourceLayerElements: u32('elements between layers of the source'),
  // The source may be a view whose rows are contiguous (v of a fused qkv): where it starts and its strides, in elements.
  sourceOffset: u32('elements of the source binding before element 0'),
  sourceTokenStride: u32('elements between tokens of the source'),
  sourceHeadStride: u32('elements between heads of the source'),
  callFlag,
  perHeadScale: u32('1: scale [H], 0: scale [1]'),
};

export const poolStoreWgsl = wgslKernel({
  kernel: 'poolStore',
  doc: 'Head rows [L, T, H, D] of the model dtype into a pool at the slots, NHD or HND, copied or quantised to fp8 (poolStore.wgsl.ts).',
  uniforms: poolStoreUniforms,
  types: { Dst: 'u32 where each invocation stores whole words, atomic<u32> where runs share words' },
  variants: { scaled: 'the pool is fp8 and reads its scale' },
  bindings: {
    source: read('u32', '[L, T, H, D] model dtype'),
    slots: read('u32', '[T] i32 or i64 (two words), non-owners skipped'),
    scale: read('u32', '[1] or [H] f32 bits', 'scaled'),
    pool: readWrite('Dst', '[L, S, H, D] or [L, numPages, H, pageSize, D]'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

export const poolReadWgsl = wgslKernel({
  kernel: 'poolRead',
  doc: 'dequantizeKv: rows of a pool at the slots into [N, H, D] rows of a float dtype (poolStore.wgsl.ts).',
  uniforms: {
    units: u32('units of rows: N × H × units per row'),
    heads: u32('H'),
    headDim: u32('D'),
    rowUnits: u32('units per head row of the destination: vectors of 4, 8 or 16 bytes, or elements (16-bit rows of odd D)'),
    slotBelow: u32('S'),
    pageSize: u32('rows per page (HND); S for NHD'),
    callFlag,
    perHeadScale: u32('1: scale [H], 0: scale [1]'),
  },
  types: { Pool: 'the vector the pool is read in: u32, vec2<u32> or vec4<u32>', Dst: 'u32, vec2<u32> or vec4<u32>: the vector of rows a unit stores; atomic<u32> for 16-bit rows of odd D' },
  variants: { scaled: 'the pool is fp8 and reads its scale' },
  bindings: {
    pool: read('Pool', 'the pool, either layout'),
    slots: read('u32', '[N] i32 or i64 (two words)'),
    scale: read('u32', '[1] or [H] f32 bits', 'scaled'),
    rows: readWrite('Dst', '[N, H, D]'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});

export const poolReadCuda = cudaKernel({
  kernel: 'poolRead',
  struct: 'PoolReadParams',
  doc: 'dequantizeKv: rows of a pool at the slots into [N, H, D] rows of a float dtype (pool_read.cu).',
  params: {
    pool: input('void', 'the pool, either layout'),
    slots: input('void', '[N]'),
    scale: input('float', '[1] or [H], or null'),
    rows: output('void', '[N, H, D]'),
    badValue: input('BadValueRecord', "where the call's value check left its verdict (check_values)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    count: i64('N'),
    heads: i64('H'),
    headDim: i64('D'),
    slotBelow: i64('S'),
    pageSize: i64('rows per page (HND); S for NHD'),
    headMajor: i64('1: HND, 0: NHD'),
    poolDType: i64('FloatCode for a pool of a float dtype, 3: fp8e4m3, 4: fp8e5m2'),
    rowsDType: i64('FloatCode of rows'),
    perHeadScale: i64('1: scale [H], 0: scale [1]'),
    slotsAreI64: i64('1: slots are i64, 0: i32'),
    eights: i64('1: eight elements a thread (D a multiple of 8, pool and rows 16-byte aligned), 0: one'),
    largestElements: i64('elements of the pool or of rows, whichever has more: below 2^31, 32-bit indices'),
  },
  launches: { default: { threads: 256, doc: 'grid-stride, one thread per row element or per eight of them' } },
  entries: [{ name: 'pool_read', launch: 'default' }],
});

/**
 * How the rope kernels (ropePool, fusedNormRope) write K and V rows into the
 * pools, in their own row loops (kv_pool.cuh): both declare these fields, so
 * one host helper (ops/kvPools.ts poolWrite) fills either block.
 */
export const poolWriteParams = {
  poolHeadMajor: i64('1: pools are HND [numPages, H, pageSize, D] per layer; 0: NHD [S, H, D] (or dense rows)'),
  poolPageSize: i64('rows per page of an HND pool (unused for NHD)'),
  poolDType: i64('0: the model dtype (the rows as rounded), 1: fp8e4m3, 2: fp8e5m2 (codes of x / scale)'),
  kScale: input('float', "the K pool's scale where fp8: [1] or [H]; null otherwise"),
  vScale: input('float', "the V pool's scale where fp8: [1] or [H]; null otherwise"),
  kScalePerHead: i64('1: kScale is [H], 0: [1]'),
  vScalePerHead: i64('1: vScale is [H], 0: [1]'),
} as const;
