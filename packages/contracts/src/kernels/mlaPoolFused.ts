/** The kernels behind mlaPoolFused: each token's latent row into a one-head pool, and its query heads' RoPE part. */
import { FLOAT_DTYPES } from '../tensor.js';
import { cudaKernel, entryGrid, f32, f64, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import { ownedSlotFields } from './ownedSlots.js';
import { callFlag } from './valueChecks.js';

export const mlaPoolCuda = cudaKernel({
  kernel: 'mlaPool',
  struct: 'MlaPoolParams',
  doc: "mlaPoolFused (mla_pool.cu): per block of tokens their cos/sin into shared memory once, then each token's latent row (RMSNorm of the first C values, RoPE of the last R) into the pool at its slot, and its query rows (the last R values rotated, the rest copied) into qRot.",
  params: {
    kvLatent: input('void', '[N, C + R]: row n at n * latentTokenStride, its elements contiguous'),
    latentTokenStride: i64('elements between tokens of kvLatent (C + R, or more for a view of a wider projection)'),
    kvNormWeight: input('void', '[C]'),
    kvNormWeightIsF32: i64("1: kvNormWeight is f32, 0: kvLatent's dtype"),
    normEps: f64('RMSNorm epsilon'),
    q: input('void', '[N, Hq, Dq]: row (n, h) at n * qTokenStride + h * qHeadStride, elements contiguous; null: no queries'),
    qTokenStride: i64('elements between tokens of q'),
    qHeadStride: i64('elements between heads of q'),
    qRot: output('void', '[N, Hq, Dq] contiguous, or null'),
    ropeAngles: input('void', 'u32 words of backend/rope.ts ropeAngleTable'),
    positions: input('void', '[N]'),
    slots: input('void', '[N]'),
    pool: output('void', '[S, 1, C + R] or [numPages, 1, pageSize, C + R]: with one head, slot s at row s either way'),
    poolDType: i64('0: the model dtype (the rows as rounded), 1: fp8e4m3, 2: fp8e5m2 (codes of x / scale)'),
    scale: input('float', 'the pool\'s scale where fp8, [1]; null otherwise'),
    badValue: input('BadValueRecord', "where the call's value check left its verdict (check_values)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    numTokens: i64('N'),
    numQoHeads: i64('Hq (0 without queries)'),
    qHeadDim: i64('Dq'),
    kvLoraRank: i64('C'),
    ropeDim: i64('R'),
    gptj: i64('0: neox pairs (j, j + R/2); 1: gptj pairs (2j, 2j + 1)'),
    positionsAreI64: i64('1: positions are i64, 0: i32'),
    slotsAreI64: i64('1: slots are i64, 0: i32'),
    slotBelow: i64('S'),
    ...ownedSlotFields,
    tokensPerBlock: i64('tokens one block takes (their cos/sin share its shared memory)'),
  },
  launches: {
    vec: { threads: 256, minBlocksPerSM: 4, doc: '16-byte vectors: C, R and Dq whole vectors, rows and strides on 16 bytes' },
    any: { threads: 256, doc: 'any shape and strides, element by element' },
  },
  entries: entryGrid('mla_pool_{dtype}_{launch}', FLOAT_DTYPES, ['vec', 'any']),
});

export const mlaRowsWgsl = wgslKernel({
  kernel: 'mlaRows',
  doc: "mlaPoolFused (mlaPoolFused.wgsl.ts): part 'latent', a group of lanes per token normalising the first C values of its latent row and rotating the last R into the pool at its owned slot; part 'queries', an invocation per vector of the query rows, the last R values of each rotated.",
  uniforms: {
    rows: u32('latent: N; queries: N × Hq (rows of q)'),
    queryHeads: u32('Hq'),
    slotBelow: u32('S'),
    callFlag,
    eps: f32('RMSNorm epsilon'),
    latentOffset: u32('row vectors of the latent binding before kvLatent[0, 0]'),
    latentTokenStride: u32('row vectors from kvLatent[n] to kvLatent[n + 1]'),
    qOffset: u32('row vectors of the q binding before q[0, 0]'),
    qTokenStride: u32('row vectors from q[n, h] to q[n + 1, h]'),
    qHeadStride: u32('row vectors from q[n, h] to q[n, h + 1]'),
    scaleAt: u32('word of the fp8 scale in cosSin, after the rows'),
  },
  types: {
    Row: 'a row vector: u32 (element access), vec2<u32> or vec4<u32>',
    Dst: 'Row, or atomic<u32> where half-words are stored one at a time',
    Pool: 'Dst for a pool of the model dtype; the fp8 codes of a row vector (u32 or vec2<u32>) for an fp8 pool, or atomic<u32> where codes share words',
  },
  variants: { latent: 'the latent part runs', scatter: 'the latent rows go to their owned slots of the pool (else to row n of a dense buffer, for the pool pass)', queries: 'the query part runs' },
  bindings: {
    latent: read('Row', '[N, C + R]', 'latent'),
    weight: read('u32', "[C] kvLatent's dtype or f32 (halves two a word)", 'latent'),
    q: read('Row', '[N, Hq, Dq]', 'queries'),
    cosSin: read('f32', '[N, R] cos then sin per token, then the fp8 scale (f32 bits)'),
    slots: read('u32', '[N] owned slots, i32 or i64 (two words)', 'scatter'),
    qRot: readWrite('Dst', '[N, Hq, Dq]', 'queries'),
    pool: readWrite('Pool', '[S, 1, C + R], or [N, C + R] rows for the pool pass', 'latent'),
    flags: readWrite('atomic<u32>', 'device-check flag words', 'scatter'),
  },
});
