/** The WebGPU kernel behind ropePoolFused with a Q/K-norm: RMSNorm of each head row, then RoPE, with the pool scatter. */
import { f32, read, readWrite, u32, wgslKernel } from './declare.js';
import { callFlag } from './valueChecks.js';
import { poolWriteUniforms } from './kvPools.js';
import { qkvRowStrides } from './ropePoolFused.js';

export const ropeNormRowsWgsl = wgslKernel({
  kernel: 'ropeNormRows',
  doc: 'RMSNorm (where a weight is given) and RoPE of q and k head rows, keys and values also into the pools (ropeNormRows.wgsl.ts); parts all, or q, k and v apart.',
  uniforms: {
    rows: u32('head rows of the dispatch'),
    queryHeads: u32('Hq (rows run q heads, then k heads, per token, where both parts run)'),
    keyHeads: u32('H'),
    slotBelow: u32('S'),
    callFlag,
    eps: f32('RMSNorm epsilon'),
    ...qkvRowStrides,
    ...poolWriteUniforms,
  },
  types: {
    Row: 'a row vector: u32 (element access), vec2<u32> or vec4<u32>',
    Dst: 'Row, or atomic<u32> where half-words are stored one at a time',
    Pool: 'Dst for pools of the model dtype; the fp8 codes of a row vector (u32 or vec2<u32>, four a word) for fp8 pools',
  },
  variants: {
    queries: 'query rows are rotated (into qRot)',
    queryNorm: 'query rows are normed first (qNormWeight)',
    keys: 'key rows are rotated (into kRot and kPool)',
    keyNorm: 'key rows are normed first (kNormWeight)',
    values: 'value rows are copied into vPool',
    rotates: 'queries or keys, or values into an fp8 pool: the cos/sin table (and the scales after it) is read',
    pool: 'keys or values: slots are read',
  },
  bindings: {
    q: read('Row', '[N, Hq, D]', 'queries'),
    k: read('Row', '[N, H, D]', 'keys'),
    v: read('Row', '[N, H, D]', 'values'),
    cosSin: read('f32', '[N, R] cos then sin per token, then the fp8 scales (f32 bits)', 'rotates'),
    qWeight: read('u32', "[D] q's dtype or f32 (halves two per word)", 'queryNorm'),
    kWeight: read('u32', "[D] q's dtype or f32 (halves two per word)", 'keyNorm'),
    slots: read('u32', '[N] owned slots, i32 or i64 (two words)', 'pool'),
    qRot: readWrite('Dst', '[N, Hq, D]', 'queries'),
    kRot: readWrite('Dst', '[N, H, D]', 'keys'),
    kPool: readWrite('Pool', '[S, H, D] or [numPages, H, pageSize, D]', 'keys'),
    vPool: readWrite('Pool', 'as kPool', 'values'),
    flags: readWrite('atomic<u32>', 'device-check flag words', 'keys'),
  },
});
