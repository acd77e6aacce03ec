/** The kernels behind ropePoolFused, and the slot-claim pass before any pool write. */
import { FLOAT_DTYPES } from '../tensor.js';
import { cudaKernel, entryGrid, f64, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import { ownedSlotFields } from './ownedSlots.js';
import { callFlag, valueRuleParams } from './valueChecks.js';
import { poolWriteParams, poolWriteUniforms } from './kvPools.js';

export const ropePoolCuda = cudaKernel({
  kernel: 'ropePool',
  struct: 'RopePoolParams',
  doc: 'RoPE of Q and K, with K and V scattered into the pools at their slots (rope_pool.cu).',
  params: {
    q: input('void', '[N, Hq, D]'),
    k: input('void', '[N, H, D]'),
    v: input('void', '[N, H, D]'),
    // Element strides of the q, k and v views (their element offsets are in the pointers); rows are read in place.
    qTokenStride: i64('elements between tokens of q'),
    qHeadStride: i64('elements between heads of q'),
    qElementStride: i64('elements between the elements of a q row (1 on the vector paths)'),
    kTokenStride: i64('elements between tokens of k'),
    kHeadStride: i64('elements between heads of k'),
    kElementStride: i64('elements between the elements of a k row (1 on the vector paths)'),
    vTokenStride: i64('elements between tokens of v'),
    vHeadStride: i64('elements between heads of v'),
    vElementStride: i64('elements between the elements of a v row (1 on the vector paths)'),
    ropeAngles: input('void', 'u32 words of backend/rope.ts ropeAngleTable'),
    positions: input('void', '[N]'),
    slots: input('void', '[N]'),
    // mRoPE and Q/K-norm (mrope.cuh, qk_norm.cuh): zero strides and null weights leave plain RoPE.
    positionStreamStride: i64('0: positions [N]; N: mRoPE streams [3, N], stream s of token n at s*N + n'),
    mropeTemporalPairs: i64('pairs j below it take the temporal stream; interleaved: 3·height, the end of the height stride'),
    mropeHeightPairsEnd: i64('pairs j below it (and not temporal) take the height stream, the rest the width stream; interleaved: 3·width'),
    mropeInterleaved: i64('1: Qwen3-VL layout, height where j % 3 == 1 below mropeTemporalPairs, width where j % 3 == 2 below mropeHeightPairsEnd, temporal elsewhere'),
    qNormWeight: input('void', '[D] RMSNorm weight of every q head, or null: no Q-norm'),
    kNormWeight: input('void', '[D] RMSNorm weight of every k head, or null: no K-norm'),
    qNormWeightIsF32: i64("1: qNormWeight is f32, 0: q's dtype"),
    kNormWeightIsF32: i64("1: kNormWeight is f32, 0: q's dtype"),
    normEps: f64('RMSNorm epsilon of the Q/K-norm'),
    qRot: output('void', '[N, Hq, D]'),
    kRot: output('void', '[N, H, D]'),
    kPool: output('void', '[S, H, D] or [numPages, H, pageSize, D]: the model dtype or fp8'),
    vPool: output('void', "kPool's layout and dtype"),
    ...poolWriteParams,
    badValue: output('BadValueRecord', "where the call's value check left its verdict (check_values), or where this kernel records it (its own rules)"),
    call: i64("this call's number (0: no value check): BadValueRecord.rejectedCall equal to it, and the kernel writes nothing"),
    // A call of few tokens tests its rules in every block and settles its duplicate slots itself: one launch, no check or claims ahead.
    ...valueRuleParams,
    inlineOwners: i64('1 (token tiles only): no claim pass; a token writes its slot unless a later token of the call names it'),
    numTokens: i64('N'),
    numQoHeads: i64('Hq'),
    numKvHeads: i64('H'),
    headDim: i64('D'),
    rotaryDim: i64('R'),
    gptj: i64('0: neox pairs (j, j + R/2); 1: gptj pairs (2j, 2j + 1)'),
    positionsAreI64: i64('1: positions are i64, 0: i32'),
    slotsAreI64: i64('1: slots are i64, 0: i32'),
    slotBelow: i64('S'),
    ...ownedSlotFields,
    tokensPerBlock: i64('tokens of one block (the tiles launch, rope_pool_tiles.cuh)'),
    rowsPerUnit: i64('of the Hq + 2*H rows of one token (q heads, k heads, v heads)'),
    unitsPerToken: i64('ceil((Hq + 2*H) / rowsPerUnit)'),
    lanesPerRow: i64('power of two <= 32'),
  },
  launches: {
    // Token tiles: a row here is one tensor's, half a fused row's bytes; each lane group works on four rows while
    // the next four load into shared memory (stagedBatches: the batches of rowsPerStep rows a group has there).
    nv1: { threads: 256, minBlocksPerSM: 4, constants: { vectorsPerLane: 1, rowsPerStep: 4, stagedBatches: 2 }, doc: 'token tiles, rows of one 16-byte vector per lane' },
    nv2: { threads: 256, minBlocksPerSM: 2, constants: { vectorsPerLane: 2, rowsPerStep: 1, rowAhead: false }, doc: 'rows of two 16-byte vectors per lane' },
    any: { threads: 256, doc: 'any row shape, element by element' },
  },
  // The token tiles again for fp8 pools: the model-dtype build leaves the fp8 stores out, and with them the registers they take.
  // Each again with paired lanes (a lane holds a vector and its neox partner; half the lanes per row): a build of its own, so
  // neither layout's registers cost the other.
  entries: [
    ...entryGrid('rope_pool_{dtype}_{launch}', FLOAT_DTYPES, ['nv1', 'nv2', 'any']),
    ...entryGrid('rope_pool_{dtype}_{launch}_fp8', FLOAT_DTYPES, ['nv1']),
    ...entryGrid('rope_pool_{dtype}_{launch}_paired', FLOAT_DTYPES, ['nv1']),
    ...entryGrid('rope_pool_{dtype}_{launch}_paired_fp8', FLOAT_DTYPES, ['nv1']),
  ],
});

export const claimSlotsCuda = cudaKernel({
  kernel: 'claimSlots',
  struct: 'ClaimSlotsParams',
  doc: 'Fills the slot-owner table for one call, before the kernel that writes the pools (claim_slots.cu).',
  params: {
    slots: input('void', '[N]'),
    slotOwners: output('SlotOwner', 'the table'),
    numTokens: i64('N'),
    slotsAreI64: i64('1: slots are i64, 0: i32'),
    slotBelow: i64('S: slots at or past it (and negative ones) claim nothing'),
    slotOwnersMask: i64('table capacity - 1'),
    generation: i64("this call's generation"),
  },
  launches: { default: { threads: 256, doc: 'one thread per token' } },
  entries: [{ name: 'claim_slots', launch: 'default' }],
});

/**
 * Where each head row of q, k and v starts, for kernels that read them as views whose head rows are
 * contiguous: offsets and strides in row vectors of their bindings.
 */
export const qkvRowStrides = {
  qOffset: u32('row vectors before q[0, 0] in its binding'),
  qTokenStride: u32('row vectors from q[n, h] to q[n + 1, h]'),
  qHeadStride: u32('row vectors from q[n, h] to q[n, h + 1]'),
  kOffset: u32('row vectors before k[0, 0] in its binding'),
  kTokenStride: u32('row vectors from k[n, h] to k[n + 1, h]'),
  kHeadStride: u32('row vectors from k[n, h] to k[n, h + 1]'),
  vOffset: u32('row vectors before v[0, 0] in its binding'),
  vTokenStride: u32('row vectors from v[n, h] to v[n + 1, h]'),
  vHeadStride: u32('row vectors from v[n, h] to v[n, h + 1]'),
} as const;

export const ropeRowsWgsl = wgslKernel({
  kernel: 'ropeRows',
  doc: 'RoPE of head rows without a norm, keys also into the pools (ropePoolFused.wgsl.ts); kind all, q or kv.',
  uniforms: {
    rows: u32('head rows of the dispatch'),
    queryHeads: u32('Hq (rows run q heads, then k heads, per token, in kind all)'),
    keyHeads: u32('H'),
    slotBelow: u32('S'),
    callFlag,
    ...qkvRowStrides,
    ...poolWriteUniforms,
  },
  types: {
    Row: 'a row vector: u32 (element access), vec2<u32> or vec4<u32>',
    Dst: 'Row, or atomic<u32> where half-words are stored one at a time',
    Pool: 'Dst for pools of the model dtype; the fp8 codes of a row vector (u32 or vec2<u32>, four a word) for fp8 pools',
  },
  variants: { queries: 'the query part runs (kind all or q)', keys: 'the key part runs (kind all or kv)' },
  bindings: {
    q: read('Row', '[N, Hq, D]', 'queries'),
    k: read('Row', '[N, H, D]', 'keys'),
    v: read('Row', '[N, H, D]', 'keys'),
    cosSin: read('f32', '[N, R] cos then sin per token, then the fp8 scales (f32 bits)'),
    slots: read('u32', '[N] i32 or i64 (two words)', 'keys'),
    qRot: readWrite('Dst', '[N, Hq, D]', 'queries'),
    kRot: readWrite('Dst', '[N, H, D]', 'keys'),
    kPool: readWrite('Pool', '[S, H, D] or [numPages, H, pageSize, D]', 'keys'),
    vPool: readWrite('Pool', 'as kPool', 'keys'),
    flags: readWrite('atomic<u32>', 'device-check flag words', 'keys'),
  },
});

export const ropeTableWgsl = wgslKernel({
  kernel: 'ropeTable',
  doc: 'cos/sin rows for RoPE from positions and the angle table, one row per token (ropeTable.wgsl.ts).',
  uniforms: {
    tokens: u32('T'),
    halfRotary: u32('R/2'),
    // mRoPE (Qwen2-VL): stream s of token t at positions[s * streamStride + t].
    streamStride: u32('0: positions [T]; T: mRoPE streams [3, T]'),
    temporalPairs: u32('pairs j below it take the temporal stream; interleaved: 3·height, the end of the height stride'),
    heightPairsEnd: u32('pairs j below it (and not temporal) take the height stream, the rest the width stream; interleaved: 3·width'),
    interleaved: u32('1: Qwen3-VL layout, height where j % 3 == 1 below temporalPairs, width where j % 3 == 2 below heightPairsEnd, temporal elsewhere'),
  },
  bindings: {
    positions: read('u32', '[T] or [3, T], i32 or i64 (two words)'),
    angleTable: read('u32', 'backend/rope.ts ropeAngleTable: mode, magnitude, f_j / 2π per pair'),
    table: readWrite('f32', '[T, R] cos then sin'),
  },
});

export const slotOwnersWgsl = wgslKernel({
  kernel: 'slotOwners',
  doc: 'The ownership pass before a pool scatter: claim marks each slot with its owner, resolve writes the slot list the scatter reads; for a call of at most a workgroup of tokens, local does both in one workgroup, without the table (slotOwners.wgsl.ts).',
  uniforms: {
    tokens: u32('N'),
    slotBelow: u32('S: slots at or past it (and negative ones) are copied as they are'),
  },
  variants: {
    table: 'the claim and resolve stages, which mark the slots in the owner table',
    owned: 'the resolve and local stages, which write the owned slot list (resolve also clears the marks)',
    skips: "copySlots' claim and local stages: a pair whose source slot is negative is skipped, so it claims nothing",
  },
  bindings: {
    slots: read('u32', '[N] i32 or i64 (two words)'),
    owners: readWrite('atomic<u32>', '[S] owner marks, all 0 between calls', 'table'),
    owned: readWrite('u32', '[N] the slots with non-owners skipped (-1)', 'owned'),
    skipIf: read('u32', "[N] i32 or i64 (two words): a token whose entry is negative claims nothing (copySlots' fromSlots)", 'skips'),
  },
});
