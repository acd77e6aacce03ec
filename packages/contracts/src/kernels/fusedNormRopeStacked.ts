/** The kernels behind fusedNormRopeStacked (and the materializer's norm + RoPE pass). */
import { FLOAT_DTYPES } from '../tensor.js';
import { cudaKernel, entryGrid, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import { ownedSlotFields } from './ownedSlots.js';
import { callFlag } from './valueChecks.js';
import { poolWriteParams, poolWriteUniforms } from './kvPools.js';

export const fusedNormRopeCuda = cudaKernel({
  kernel: 'fusedNormRope',
  struct: 'FusedNormRopeParams',
  doc: 'RMSNorm + RoPE of every K head and a copy of every V head, for all tokens and layers (fused_norm_rope.cu).',
  params: {
    kv: input('void', "K row (t, l, h) at t*kvTokenStride + l*kvLayerStride + h*kvHeadStride; its V row vOffset later"),
    kNormWeight: input('void', "[L, D], kv's dtype or f32"),
    eps: input('float', '[L]'),
    cosSinCache: input('void', '[P, R]; null: angles from ropeAngles'),
    ropeAngles: input('void', 'u32 words of backend/rope.ts ropeAngleTable'),
    positions: input('void', '[T], or [3, T] with mRoPE'),
    // mRoPE (mrope.cuh): a zero stride leaves one stream.
    positionStreamStride: i64('0: positions [T]; T: mRoPE streams [3, T], stream s of token t at s*T + t'),
    mropeTemporalPairs: i64('pairs j below it take the temporal stream; interleaved: 3·height, the end of the height stride'),
    mropeHeightPairsEnd: i64('pairs j below it (and not temporal) take the height stream, the rest the width stream; interleaved: 3·width'),
    mropeInterleaved: i64('1: Qwen3-VL layout, height where j % 3 == 1 below mropeTemporalPairs, width where j % 3 == 2 below mropeHeightPairsEnd, temporal elsewhere'),
    slots: input('void', '[T] or null (token t writes row t)'),
    kOut: output('void', 'row (l, row, h) at l*outLayerStride + its pool row (kv_pool.cuh poolElement; (row*H + h)*D for NHD); may be kv itself (in place)'),
    vOut: output('void', 'laid out as kOut; null: V is not copied'),
    ...poolWriteParams,
    badValue: input('BadValueRecord', "where the call's value check left its verdict (check_values)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    numTokens: i64('T'),
    numLayers: i64('L'),
    numKvHeads: i64('H'),
    headDim: i64('D'),
    rotaryDim: i64('R'),
    kvTokenStride: i64('elements between tokens of kv'),
    kvLayerStride: i64('elements between layers of kv'),
    kvHeadStride: i64('elements between heads of a kv row (D for a contiguous one)'),
    kvElementStride: i64('elements between the elements of a head row of kv (1 on the vector paths)'),
    vOffset: i64('elements from a K row to its V row'),
    outLayerStride: i64('elements between layers of kOut and vOut'),
    gptj: i64('0: neox pairs (j, j + R/2); 1: gptj pairs (2j, 2j + 1)'),
    weightIsF32: i64('1: kNormWeight is f32'),
    cacheDType: i64("the cache's FloatCode"),
    cacheVectors: i64("1: an f32 cache whose runs of a lane's cos (and sin) are read 16 bytes at a time"),
    positionsAreI64: i64('1: positions are i64, 0: i32'),
    slotsAreI64: i64('1: slots are i64, 0: i32'),
    positionMin: i64('smallest valid position'),
    positionBelow: i64('exclusive bound of valid positions'),
    slotBelow: i64('exclusive bound of valid slots'),
    ...ownedSlotFields,
    rowsPerUnit: i64("head rows (of a token's L*H) per unit of work"),
    unitsPerToken: i64('ceil(L*H / rowsPerUnit)'),
    lanesPerRow: i64('power of two <= 32'),
  },
  launches: {
    // 4 blocks of 256 per multiprocessor (64 registers) for rows of one vector per lane, one row ahead.
    nv1: { threads: 256, minBlocksPerSM: 4, constants: { vectorsPerLane: 1, rowsPerStep: 1, rowAhead: true }, doc: 'rows of one 16-byte vector per lane' },
    nv2: { threads: 256, minBlocksPerSM: 2, constants: { vectorsPerLane: 2, rowsPerStep: 1, rowAhead: false }, doc: 'rows of two 16-byte vectors per lane' },
    // nv1's rows held as pairs (a vector and its neox partner a lane, half the lanes): two rows' worth of registers a step and
    // the next ahead fit 3 blocks a multiprocessor (85 registers), with more bytes in flight a multiprocessor than nv1's 4.
    paired: { threads: 256, minBlocksPerSM: 3, constants: { vectorsPerLane: 2, rowsPerStep: 1, rowAhead: true }, doc: "nv1's rows, a vector and its neox partner per lane" },
    any: { threads: 256, doc: 'any row shape, element by element' },
  },
  entries: [...entryGrid('fused_norm_rope_{dtype}_{launch}', FLOAT_DTYPES, ['nv1', 'nv2', 'any']), ...FLOAT_DTYPES.map((dtype) => ({ name: `fused_norm_rope_${dtype}_nv1_paired`, launch: 'paired', dtype }))],
});

export const normRopeWgsl = wgslKernel({
  kernel: 'normRope',
  doc: 'RMSNorm + RoPE of every K head and a bit-exact copy of every V head, for all tokens and layers (fusedNormRopeStacked.wgsl.ts).',
  uniforms: {
    tokens: u32('T'),
    layers: u32('L'),
    heads: u32('H'),
    rows: u32('T*L*H head rows'),
    positionBelow: u32('P (a cache) or 2^31 (a per-token table: any i32 position >= 0)'),
    // mRoPE (Qwen2-VL): stream s of token t at positions[s * streamStride + t], every stream checked.
    streamStride: u32('0: positions [T]; T: mRoPE streams [3, T]'),
    temporalPairs: u32('pairs j below it take the temporal stream; interleaved: 3·height, the end of the height stride'),
    heightPairsEnd: u32('pairs j below it (and not temporal) take the height stream, the rest the width stream; interleaved: 3·width'),
    interleaved: u32('1: Qwen3-VL layout, height where j % 3 == 1 below temporalPairs, width where j % 3 == 2 below heightPairsEnd, temporal elsewhere'),
    slotBelow: u32('S (scatter into pools)'),
    callFlag,
    epsWordOffset: u32('where eps starts in the weights buffer (eps packed after the weights)'),
    destLayerStride: u32('vectors between layers of the destination (layer views may be padded)'),
    ...poolWriteUniforms,
  },
  types: {
    KvRow: 'a row vector: u32 (element access), vec2<u32> or vec4<u32>',
    KvDst: 'KvRow, or atomic<u32> where half-words are stored one at a time, or the fp8 codes of a row vector (u32 or vec2<u32>) for fp8 pools',
  },
  variants: {
    separateEps: 'eps is its own buffer (not packed after the weights)',
    scatter: 'rows go to pool slots',
  },
  bindings: {
    kv: read('KvRow', '[T, L, 2*H*D]: K heads then V heads of each (token, layer)'),
    weights: read('u32', '[L, D] norm weights (halves two per word), eps after them where packed, then the fp8 scales (f32 bits)'),
    eps: read('f32', '[L]', 'separateEps'),
    cosSin: read('u32', '[P, R] cos then sin per position, or one row per token'),
    positions: read('u32', '[T] or [3, T], i32 or i64 (two words)'),
    slots: read('u32', '[T] i32 or i64 (two words)', 'scatter'),
    kDst: readWrite('KvDst', 'normed, rotated K rows'),
    vDst: readWrite('KvDst', 'V rows as read'),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});
