/**
 * Compile-time contract checks, verified by `tsc --noEmit` (the typecheck
 * task): every `@ts-expect-error` must meet an error, and every
 * `expectTypeOf` must hold. Literal shapes are checked; `number` dims pass
 * through to the runtime validators.
 */
import { expectTypeOf } from 'vitest';
import { modelDims } from '../../src/index.js';
import type { Backend, ContractViolation, Tensor } from '../../src/index.js';

declare const backend: Backend;
declare const n: number;

// A small model: T=4 tokens, L=2 layers, H=2 KV heads, D=8, R=8, P=16 cache rows.
const kv = backend.tensor('bf16', [4, 2, 32]);
const kNormWeight = backend.tensor('bf16', [2, 8]);
const eps = backend.tensor('f32', [2]);
const cosSinCache = backend.tensor('f32', [16, 8]);
const positions = backend.tensor('i32', [4]);
const base = { kv, kNormWeight, eps, cosSinCache, positions, numKvHeads: 2, headDim: 8, rotaryDim: 8 } as const;

// --- fusedNormRopeStacked: outputs carry literal shapes [L, T, H, D].
const out = backend.fusedNormRopeStacked(base);
expectTypeOf(out.kOut).toEqualTypeOf<Tensor<'bf16', readonly [2, 4, 2, 8]>>();
expectTypeOf(out.vOut.shape).toEqualTypeOf<readonly [2, 4, 2, 8]>();
backend.fusedNormRopeStacked({ ...base, kOut: backend.empty('bf16', [2, 4, 2, 8]), ropeStyle: 'gptj' });
backend.fusedNormRopeStacked({ ...base, kNormWeight: backend.tensor('f32', [2, 8]) }); // f32 weight is allowed

// Seed 003 (KV010): kv is not 3-D.
// @ts-expect-error KV010
backend.fusedNormRopeStacked({ ...base, kv: backend.tensor('bf16', [4, 64]) });
// KV011: trailing dim is not 2*H*D = 32.
// @ts-expect-error KV011
backend.fusedNormRopeStacked({ ...base, kv: backend.tensor('bf16', [4, 2, 30]) });
// KV012: kNormWeight is not [L, D].
// @ts-expect-error KV012
backend.fusedNormRopeStacked({ ...base, kNormWeight: backend.tensor('bf16', [3, 8]) });
// Seed 004 (KV013): eps is not [L].
// @ts-expect-error KV013
backend.fusedNormRopeStacked({ ...base, eps: backend.tensor('f32', [1]) });
// Seed 002 (KV014): a caller-supplied kOut in [T, L, H, D] order.
// @ts-expect-error KV014
backend.fusedNormRopeStacked({ ...base, kOut: backend.empty('bf16', [4, 2, 2, 8]) });
// @ts-expect-error KV014 (vOut too)
backend.fusedNormRopeStacked({ ...base, vOut: backend.empty('bf16', [2, 5, 2, 8]) });
// KV015: positions is not [T].
// @ts-expect-error KV015
backend.fusedNormRopeStacked({ ...base, positions: backend.tensor('i32', [3]) });
// KV016: cosSinCache width is not rotaryDim.
// @ts-expect-error KV016
backend.fusedNormRopeStacked({ ...base, cosSinCache: backend.tensor('f32', [16, 4]) });
// KV007: rotaryDim odd, or larger than headDim.
// @ts-expect-error KV007
backend.fusedNormRopeStacked({ ...base, rotaryDim: 7, cosSinCache: backend.tensor('f32', [16, 7]) });
// @ts-expect-error KV007
backend.fusedNormRopeStacked({ ...base, rotaryDim: 10, cosSinCache: backend.tensor('f32', [16, 10]) });
// KV006: non-positive or fractional params.
// @ts-expect-error KV006
backend.fusedNormRopeStacked({ ...base, numKvHeads: 0 });
// @ts-expect-error KV006
backend.fusedNormRopeStacked({ ...base, headDim: 8.5 });
// KV004: an integer kv.
// @ts-expect-error KV004
backend.fusedNormRopeStacked({ ...base, kv: backend.tensor('i32', [4, 2, 32]) });
// KV005: kOut of another float dtype than kv.
// @ts-expect-error KV005
backend.fusedNormRopeStacked({ ...base, kOut: backend.empty('f16', [2, 4, 2, 8]) });
// KV009: an unknown rope style.
// @ts-expect-error KV009
backend.fusedNormRopeStacked({ ...base, ropeStyle: 'llama' });

// --- `number` dims pass through to the runtime checks, and outputs keep what is known.
const dynKv = backend.tensor('bf16', [n, 2, 32]);
const dyn = backend.fusedNormRopeStacked({ ...base, kv: dynKv, positions: backend.tensor('i32', [n]) });
expectTypeOf(dyn.kOut.shape).toEqualTypeOf<readonly [2, number, 2, 8]>();
const unknownRank = backend.tensor('bf16', [4, 2, 32] as number[]);
backend.fusedNormRopeStacked({ ...base, kv: unknownRank });
backend.fusedNormRopeStacked({ ...base, numKvHeads: n, headDim: n, rotaryDim: n });
// A dtype known only as `DType` (or a float union) passes too: checked at run time.
declare const anyTensor: Tensor;
declare const someFloat: Tensor<'f32' | 'bf16', readonly [4, 2, 32]>;
backend.fusedNormRopeStacked({ ...base, kv: anyTensor });
backend.fusedNormRopeStacked({ ...base, kv: someFloat, kOut: backend.empty('f32', [2, 4, 2, 8]) });

// Large dims: 2*H*D through digit-wise arithmetic, past what tuple-length arithmetic can reach.
const bigKv = backend.tensor('bf16', [4, 2, 2 * 32 * 256]);
backend.fusedNormRopeStacked({
  ...base,
  kv: bigKv,
  numKvHeads: 32,
  headDim: 256,
  rotaryDim: 128,
  kNormWeight: backend.tensor('bf16', [2, 256]),
  cosSinCache: backend.tensor('f32', [16, 128]),
});
backend.fusedNormRopeStacked({
  ...base,
  // @ts-expect-error KV011: 2*32*256 = 16384, not 16383
  kv: backend.tensor('bf16', [4, 2, 16383]),
  numKvHeads: 32,
  headDim: 256,
  rotaryDim: 128,
  kNormWeight: backend.tensor('bf16', [2, 256]),
  cosSinCache: backend.tensor('f32', [16, 128]),
});

// --- The materializer: its constructor fixes DT, L, H, D and hidden for every call.
const m = backend.createKvMaterializer({
  kvWeight: backend.tensor('bf16', [2, 32, 64]),
  kNormWeight,
  eps: 1e-6,
  numKvHeads: 2,
  headDim: 8,
  ropeBase: 10000,
});
const ctxHidden = backend.tensor('bf16', [4, 64]);
m.materialize({
  ctxHidden,
  positions,
  writeLayerKv: (layer, k, v) => {
    expectTypeOf(layer).toEqualTypeOf<number>();
    expectTypeOf(k).toEqualTypeOf<Tensor<'bf16', readonly [4, 2, 8]>>();
    expectTypeOf(v.shape).toEqualTypeOf<readonly [4, 2, 8]>();
  },
});
// The positional form is gone: one object, as every other op takes (at run time it throws KV044).
// @ts-expect-error the positional form: materialize takes one object of named arguments
m.materialize(ctxHidden, positions, () => {});
m.materialize({ ctxHidden, positions: backend.tensor('i64', [4, 1]), writeLayerKv: () => {} });
m.materialize({ ctxHidden, positions: backend.tensor('i64', [1, 4]), writeLayerKv: () => {} });
// Seed 000 (KV023): positions count differs from the ctxHidden token count.
// @ts-expect-error KV023
m.materialize({ ctxHidden, positions: backend.tensor('i32', [3]), writeLayerKv: () => {} });
// @ts-expect-error KV023 (flattened [T, 1] too)
m.materialize({ ctxHidden, positions: backend.tensor('i32', [5, 1]), writeLayerKv: () => {} });
// KV026: positions that do not flatten to one list.
// @ts-expect-error KV026
m.materialize({ ctxHidden, positions: backend.tensor('i32', [2, 2]), writeLayerKv: () => {} });
// mRoPE: [3, T] positions pass with mropeSection (whether the section is there is checked at run time); another token count does not.
m.materialize({ ctxHidden, positions: backend.tensor('i32', [3, 4]), mropeSection: [1, 2, 1], writeLayerKv: () => {} });
m.materializeInto({ ctxHidden, positions: backend.tensor('i64', [3, 4]), mropeSection: [2, 2, 0], kPool: backend.empty('bf16', [2, 9, 2, 8]), vPool: backend.empty('bf16', [2, 9, 2, 8]), slots: backend.tensor('i64', [4]) });
// @ts-expect-error KV023
m.materialize({ ctxHidden, positions: backend.tensor('i32', [3, 5]), mropeSection: [1, 2, 1], writeLayerKv: () => {} });
// @ts-expect-error mropeSection is three counts
m.materialize({ ctxHidden, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 2], writeLayerKv: () => {} });
// Qwen3-VL's interleaved layout: a boolean beside mropeSection (its fit among the pairs is checked at run time).
m.materializeInto({ ctxHidden, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1], mropeInterleaved: true, kPool: backend.empty('bf16', [2, 9, 2, 8]), vPool: backend.empty('bf16', [2, 9, 2, 8]), slots: backend.tensor('i64', [4]) });
// @ts-expect-error mropeInterleaved is a boolean, not the config's string
m.materialize({ ctxHidden, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1], mropeInterleaved: 'true', writeLayerKv: () => {} });
// KV022: ctxHidden width differs from the weights' hidden.
// @ts-expect-error KV022
m.materialize({ ctxHidden: backend.tensor('bf16', [4, 32]), positions, writeLayerKv: () => {} });
// KV005: ctxHidden in another dtype than the weights.
// @ts-expect-error KV005
m.materialize({ ctxHidden: backend.tensor('f32', [4, 64]), positions, writeLayerKv: () => {} });
// writeLayerKv is synchronous: an async callback, or one returning any thenable, does not compile (at run time: KV044).
const reads: Promise<Float32Array>[] = [];
m.materialize({ ctxHidden, positions, writeLayerKv: (_l, k) => reads.push(backend.read(k)) });
m.materialize({ ctxHidden, positions, writeLayerKv: (_l, k) => new Map().set(0, backend.read(k)) });
// @ts-expect-error an async callback
m.materialize({ ctxHidden, positions, writeLayerKv: async (_l, k) => { await backend.read(k); } });
// @ts-expect-error a callback that returns a promise
m.materialize({ ctxHidden, positions, writeLayerKv: (_l, k) => backend.read(k) });
declare const thenable: PromiseLike<void>;
// @ts-expect-error a callback that returns a thenable
m.materialize({ ctxHidden, positions, writeLayerKv: () => thenable });

const kPool = backend.empty('bf16', [2, 100, 2, 8]);
m.materializeInto({ ctxHidden, positions, kPool, vPool: backend.empty('bf16', [2, 100, 2, 8]), slots: backend.tensor('i64', [4]) });
// KV024: a pool with the wrong layer count.
// @ts-expect-error KV024
m.materializeInto({ ctxHidden, positions, kPool: backend.empty('bf16', [1, 100, 2, 8]), vPool: kPool, slots: positions });
// KV024: vPool sized unlike kPool.
// @ts-expect-error KV024
m.materializeInto({ ctxHidden, positions, kPool, vPool: backend.empty('bf16', [2, 99, 2, 8]), slots: positions });
// KV025: slots is not [T].
// @ts-expect-error KV025
m.materializeInto({ ctxHidden, positions, kPool, vPool: backend.empty('bf16', [2, 100, 2, 8]), slots: backend.tensor('i32', [5]) });

// KV020: kvWeight rows are not 2*H*D.
backend.createKvMaterializer({
  // @ts-expect-error KV020
  kvWeight: backend.tensor('bf16', [2, 16, 64]),
  kNormWeight,
  eps: 1e-6,
  numKvHeads: 2,
  headDim: 8,
  ropeBase: 10000,
});
// KV013: a per-layer eps of the wrong length.
backend.createKvMaterializer({
  kvWeight: backend.tensor('bf16', [2, 32, 64]),
  kNormWeight,
  // @ts-expect-error KV013
  eps: backend.tensor('f32', [3]),
  numKvHeads: 2,
  headDim: 8,
  ropeBase: 10000,
});

// --- ropePoolFused: N=4 tokens, Hq=8, H=2, D=8, pools of S=100 slots.
const pool = backend.empty('f16', [100, 2, 8]);
const rope = {
  q: backend.tensor('f16', [4, 8, 8]),
  k: backend.tensor('f16', [4, 2, 8]),
  v: backend.tensor('f16', [4, 2, 8]),
  positions,
  slots: backend.tensor('i64', [4]),
  kPool: pool,
  vPool: backend.empty('f16', [100, 2, 8]),
  headDim: 8,
  numQoHeads: 8,
  numKvHeads: 2,
  ropeBase: 1e6,
} as const;
const rot = backend.ropePoolFused(rope);
expectTypeOf(rot.qRot).toEqualTypeOf<Tensor<'f16', readonly [4, 8, 8]>>();
expectTypeOf(rot.kRot.shape).toEqualTypeOf<readonly [4, 2, 8]>();
// Seed 001 (KV034): positions or slots count differs from q's tokens.
// @ts-expect-error KV034
backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3]) });
// @ts-expect-error KV034
backend.ropePoolFused({ ...rope, slots: backend.tensor('i32', [5]) });
// KV033: 2-D slots.
// @ts-expect-error KV033
backend.ropePoolFused({ ...rope, slots: backend.tensor('i32', [4, 1]) });
// ropeScaling is the exact union of the Hugging Face variants: a key of another variant, or a snake_case key, does not compile.
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 }, angles: 'float32' });
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } });
// @ts-expect-error lowFreqFactor is not a field of linear scaling
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'linear', factor: 2, lowFreqFactor: 1 } });
// @ts-expect-error Hugging Face's key, not kvkit's
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'dynamic', factor: 2, original_max_position_embeddings: 4096 } });
// @ts-expect-error originalMaxPositions is required for yarn
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'yarn', factor: 4 } });
// LongRoPE (Phi-3): the factor lists are number arrays (their length, R/2, is checked at run time).
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'longrope', shortFactor: [1, 1, 1, 1], longFactor: [1, 2, 4, 8], originalMaxPositions: 4096, factor: 32 } });
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'longrope', shortFactor: [1, 1, 1, 1], longFactor: [1, 2, 4, 8], originalMaxPositions: 4096, attentionFactor: 1.19, sequenceLength: 100 }, angles: 'float32' });
// @ts-expect-error shortFactor and longFactor are required for longrope
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'longrope', factor: 4 } });
// @ts-expect-error Hugging Face's key, not kvkit's
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'longrope', short_factor: [1, 1, 1, 1], longFactor: [1, 2, 4, 8], originalMaxPositions: 4096 } });
// @ts-expect-error a factor list, not one number for every pair
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'longrope', shortFactor: 1, longFactor: [1, 2, 4, 8], originalMaxPositions: 4096 } });
// YaRN with DeepSeek's mscale and mscaleAllDim.
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'yarn', factor: 40, originalMaxPositions: 4096, mscale: 1, mscaleAllDim: 1, betaFast: 32, betaSlow: 1 } });
// @ts-expect-error no such scaling type
backend.ropePoolFused({ ...rope, ropeScaling: { type: 'su', factor: 4 } });
// @ts-expect-error no such angle convention
backend.ropePoolFused({ ...rope, angles: 'float64' });
// KV030: 2-D q.
// @ts-expect-error KV030
backend.ropePoolFused({ ...rope, q: backend.tensor('f16', [4, 64]) });
// KV031: q heads differ from numQoHeads.
// @ts-expect-error KV031
backend.ropePoolFused({ ...rope, q: backend.tensor('f16', [4, 4, 8]) });
// KV032: k with another token count than q.
// @ts-expect-error KV032
backend.ropePoolFused({ ...rope, k: backend.tensor('f16', [5, 2, 8]) });
// KV035 and KV036: pools of the wrong rank, or heads.
// @ts-expect-error KV035
backend.ropePoolFused({ ...rope, kPool: backend.empty('f16', [2, 100, 2, 8]) });
// @ts-expect-error KV036
backend.ropePoolFused({ ...rope, vPool: backend.empty('f16', [100, 4, 8]) });
// HND pools [numPages, H, pageSize, D] with layout 'HND'; an NHD pool there is KV073, an HND one without it KV035.
backend.ropePoolFused({ ...rope, layout: 'HND', kPool: backend.empty('f16', [25, 2, 4, 8]), vPool: backend.empty('f16', [25, 2, 4, 8]) });
// @ts-expect-error KV073
backend.ropePoolFused({ ...rope, layout: 'HND' });
// @ts-expect-error KV035
backend.ropePoolFused({ ...rope, kPool: backend.empty('f16', [25, 2, 4, 8]), vPool: backend.empty('f16', [25, 2, 4, 8]) });
// dequantizeKv: H and D come from the pool's own axes, D the last of an HND pool [numPages, H, pageSize, D].
const hndPool = backend.empty('fp8e4m3', [25, 8, 16, 128]);
const read3 = { slots: backend.tensor('i32', [3]), scale: backend.tensor('f32', [8]) };
backend.dequantizeKv({ ...read3, pool: hndPool, rows: backend.empty('bf16', [3, 8, 128]), layout: 'HND' });
backend.dequantizeKv({ ...read3, pool: backend.empty('fp8e4m3', [400, 8, 128]), rows: backend.empty('bf16', [3, 8, 128]) });
// @ts-expect-error KV074
backend.dequantizeKv({ ...read3, pool: hndPool, rows: backend.empty('bf16', [3, 8, 16]), layout: 'HND' });
// @ts-expect-error KV072
backend.dequantizeKv({ ...read3, pool: hndPool, scale: backend.tensor('f32', [16]), rows: backend.empty('bf16', [3, 8, 128]), layout: 'HND' });
// --- A pool whose layout is picked at run time: a union of an HND and an NHD tensor. Each member is checked
// against the layouts `layout` allows: one literal allows one, a union of both (or a `string`) either, and which
// member goes with which value is the runtime check's (KV073, KV035).
declare const paged: boolean;
declare const layoutName: string;
const pagedLayout = paged ? 'HND' : 'NHD';
const eitherK = paged ? backend.empty('f16', [25, 2, 4, 8]) : backend.empty('f16', [100, 2, 8]);
const eitherV = paged ? backend.empty('f16', [25, 2, 4, 8]) : backend.empty('f16', [100, 2, 8]);
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: eitherV, layout: pagedLayout });
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: eitherV, layout: layoutName });
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: eitherV, layout: paged ? 'HND' : 'NHD' });
backend.ropePoolFused({ ...rope, layout: pagedLayout });
// One layout allowed: the member of the other one fails with that layout's code.
// @ts-expect-error KV035
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: eitherV });
// @ts-expect-error KV073
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: eitherV, layout: 'HND' });
// A member that fits neither layout fails with the code of the layout of its rank, or the rank code.
// @ts-expect-error KV073: the HND member has 3 heads
backend.ropePoolFused({ ...rope, kPool: paged ? backend.empty('f16', [25, 3, 4, 8]) : backend.empty('f16', [100, 2, 8]), vPool: eitherV, layout: pagedLayout });
// @ts-expect-error KV036: the NHD member's head dim is 7
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: paged ? backend.empty('f16', [25, 2, 4, 8]) : backend.empty('f16', [100, 2, 7]), layout: pagedLayout });
// @ts-expect-error KV035: a 5-D member is neither
backend.ropePoolFused({ ...rope, kPool: paged ? backend.empty('f16', [25, 2, 4, 8, 1]) : backend.empty('f16', [100, 2, 8]), vPool: eitherV, layout: pagedLayout });
// vPool is compared with kPool's member of the same layout: other page counts fail.
// @ts-expect-error KV073
backend.ropePoolFused({ ...rope, kPool: eitherK, vPool: paged ? backend.empty('f16', [24, 2, 4, 8]) : backend.empty('f16', [100, 2, 8]), layout: pagedLayout });
// dequantizeKv: rows and scale take H and D from whichever member is read.
const eitherPool = paged ? backend.empty('fp8e4m3', [25, 8, 16, 128]) : backend.empty('fp8e4m3', [400, 8, 128]);
backend.dequantizeKv({ ...read3, pool: eitherPool, rows: backend.empty('bf16', [3, 8, 128]), layout: pagedLayout });
// @ts-expect-error KV074
backend.dequantizeKv({ ...read3, pool: eitherPool, rows: backend.empty('bf16', [3, 8, 16]), layout: pagedLayout });
// @ts-expect-error KV072
backend.dequantizeKv({ ...read3, pool: eitherPool, scale: backend.tensor('f32', [16]), rows: backend.empty('bf16', [3, 8, 128]), layout: pagedLayout });
// @ts-expect-error KV035
backend.dequantizeKv({ ...read3, pool: eitherPool, rows: backend.empty('bf16', [3, 8, 128]) });
// materializeInto: [L, S, H, D] or [L, numPages, H, pageSize, D].
const eitherLayers = paged ? backend.empty('bf16', [2, 25, 2, 4, 8]) : backend.empty('bf16', [2, 100, 2, 8]);
m.materializeInto({ ctxHidden, positions, slots: positions, kPool: eitherLayers, vPool: eitherLayers, layout: pagedLayout });
// @ts-expect-error KV024
m.materializeInto({ ctxHidden, positions, slots: positions, kPool: eitherLayers, vPool: eitherLayers });
// @ts-expect-error KV073: the paged member has 3 layers
m.materializeInto({ ctxHidden, positions, slots: positions, kPool: paged ? backend.empty('bf16', [3, 25, 2, 4, 8]) : backend.empty('bf16', [2, 100, 2, 8]), vPool: eitherLayers, layout: pagedLayout });

// fp8 pools take the model dtype's place; a scale is [1] or [H] (KV072).
backend.ropePoolFused({ ...rope, kPool: backend.empty('fp8e4m3', [100, 2, 8]), vPool: backend.empty('fp8e4m3', [100, 2, 8]), kScale: backend.empty('f32', [1]), vScale: backend.empty('f32', [2]) });
// @ts-expect-error KV072
backend.ropePoolFused({ ...rope, kPool: backend.empty('fp8e4m3', [100, 2, 8]), vPool: backend.empty('fp8e4m3', [100, 2, 8]), kScale: backend.empty('f32', [8]), vScale: backend.empty('f32', [1]) });
// KV037: numQoHeads not a multiple of numKvHeads.
// @ts-expect-error KV037
backend.ropePoolFused({ ...rope, numQoHeads: 7, q: backend.tensor('f16', [4, 7, 8]) });
// KV005: v in another dtype than q.
// @ts-expect-error KV005
backend.ropePoolFused({ ...rope, v: backend.tensor('bf16', [4, 2, 8]) });
// mRoPE: [3, N] positions pass with mropeSection; another token count or a [N, 1] tensor does not.
expectTypeOf(backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1] }).qRot.shape).toEqualTypeOf<readonly [4, 8, 8]>();
// @ts-expect-error KV034
backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3, 5]), mropeSection: [2, 1, 1] });
// @ts-expect-error KV033
backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [4, 1]) });
// @ts-expect-error mropeSection is three counts
backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 2] });
expectTypeOf(backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1], mropeInterleaved: true }).kRot.shape).toEqualTypeOf<readonly [4, 2, 8]>();
backend.fusedNormRopeStacked({ ...base, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1], mropeInterleaved: false });
// @ts-expect-error mropeInterleaved is a boolean
backend.ropePoolFused({ ...rope, positions: backend.tensor('i32', [3, 4]), mropeSection: [2, 1, 1], mropeInterleaved: 1 });
// Q/K-norm: weights [D] in q's dtype or f32.
backend.ropePoolFused({ ...rope, qNormWeight: backend.tensor('f16', [8]), kNormWeight: backend.tensor('f32', [8]), eps: 1e-6 });
// @ts-expect-error KV068
backend.ropePoolFused({ ...rope, qNormWeight: backend.tensor('f16', [2, 8]), eps: 1e-6 });
// @ts-expect-error KV005
backend.ropePoolFused({ ...rope, kNormWeight: backend.tensor('bf16', [8]), eps: 1e-6 });

// --- A failed shape check names the shape it expected, as far as it is known at compile time.
declare const wrongKOut: Tensor<'bf16', readonly [4, 2, 2, 8]>;
type KOutParam = Parameters<typeof backend.fusedNormRopeStacked<2, 8, 8, 'neox', typeof kv, typeof kNormWeight, typeof eps, typeof cosSinCache, typeof positions, typeof wrongKOut, Tensor>>[0]['kOut'];
expectTypeOf<Exclude<KOutParam, undefined>>().toEqualTypeOf<Tensor<'bf16', readonly [4, 2, 2, 8]> & ContractViolation<'KV014', 'Output is not [L, T, H, D]', readonly [2, 4, 2, 8]>>();

// --- A dtype violation names the dtypes the contract accepts.
declare const intKv: Tensor<'i32', readonly [4, 2, 32]>;
type KvParam = Parameters<typeof backend.fusedNormRopeStacked<2, 8, 8, 'neox', typeof intKv, typeof kNormWeight, typeof eps, typeof cosSinCache, typeof positions, Tensor, Tensor>>[0]['kv'];
expectTypeOf<KvParam>().toEqualTypeOf<Tensor<'i32', readonly [4, 2, 32]> & ContractViolation<'KV004', 'Unsupported dtype', 'f32' | 'f16' | 'bf16'>>();
// @ts-expect-error KV004 prints "f32" | "f16" | "bf16"
backend.ropePoolFused({ ...rope, q: backend.tensor('i64', [4, 8, 8]) });
// @ts-expect-error KV005 prints "f16" | "fp8e4m3" | "fp8e5m2"
backend.ropePoolFused({ ...rope, kPool: backend.empty('bf16', [100, 2, 8]), vPool: backend.empty('bf16', [100, 2, 8]) });

// --- Dims in a shared object: a plain object widens them to `number`, which passes every shape check (left to
// run time, and the outputs say `number`); `modelDims` keeps them literal, so the checks stay on.
const widened = { numQoHeads: 8, numKvHeads: 2, headDim: 8, ropeBase: 1e6 };
const { q: q4, k: k4, v: v4, slots: slots4 } = rope;
const unchecked = backend.ropePoolFused({ ...widened, q: q4, k: k4, v: v4, positions, slots: slots4, kPool: backend.empty('f16', [100, 3, 8]), vPool: pool });
expectTypeOf(unchecked.kRot.shape).toEqualTypeOf<readonly [4, number, number]>();
const dims = modelDims({ numQoHeads: 8, numKvHeads: 2, headDim: 8, ropeBase: 1e6, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } });
expectTypeOf(dims.numKvHeads).toEqualTypeOf<2>();
const checked = backend.ropePoolFused({ ...dims, q: q4, k: k4, v: v4, positions, slots: slots4, kPool: pool, vPool: pool });
expectTypeOf(checked.kRot.shape).toEqualTypeOf<readonly [4, 2, 8]>();
// @ts-expect-error KV036
backend.ropePoolFused({ ...dims, q: q4, k: k4, v: v4, positions, slots: slots4, kPool: backend.empty('f16', [100, 3, 8]), vPool: pool });
// @ts-expect-error KV031
backend.ropePoolFused({ ...dims, q: backend.tensor('f16', [4, 4, 8]), k: k4, v: v4, positions, slots: slots4, kPool: pool, vPool: pool });
backend.fusedNormRopeStacked({ ...base, ...modelDims({ numKvHeads: 2, headDim: 8, rotaryDim: 8 }) });
// @ts-expect-error KV011
backend.fusedNormRopeStacked({ ...base, ...modelDims({ numKvHeads: 4, headDim: 8, rotaryDim: 8 }) });
// Dims computed at run time stay accepted; the literal ones beside them are still checked.
modelDims({ numKvHeads: n, headDim: 128 });
// modelDims checks the dims it is given as the ops do.
// @ts-expect-error KV006
modelDims({ numKvHeads: 0, headDim: 128 });
// @ts-expect-error KV037
modelDims({ numQoHeads: 28, numKvHeads: 8 });
// @ts-expect-error KV007
modelDims({ headDim: 64, rotaryDim: 65 });
// @ts-expect-error a dim is a number
modelDims({ headDim: '128' });

// --- Generic code: a dim typed as the caller's own type parameter passes through to the runtime check.
export function normRopeAnyLength<T extends number>(kvT: Tensor<'bf16', readonly [T, 2, 32]>, positionsT: Tensor<'i32', readonly [T]>) {
  const { kOut } = backend.fusedNormRopeStacked({ ...base, kv: kvT, positions: positionsT });
  expectTypeOf(kOut.shape).toEqualTypeOf<readonly [2, T, 2, 8]>();
  const mT = backend.createKvMaterializer({ kvWeight: backend.tensor('bf16', [2, 32, 64]), kNormWeight, eps: 1e-6, numKvHeads: 2, headDim: 8, ropeBase: 10000 });
  mT.materialize({
    ctxHidden: backend.tensor('bf16', [0, 64] as unknown as readonly [T, 64]),
    positions: positionsT,
    writeLayerKv: (_layer, k) => expectTypeOf(k.shape).toEqualTypeOf<readonly [T, 2, 8]>(),
  });
  return kOut;
}

// Pools whose slot count is the caller's type parameter, in either layout or a union of both.
export function poolsAnySize<S extends number>(nhd: Tensor<'f16', readonly [S, 2, 8]>, hnd: Tensor<'f16', readonly [S, 2, 4, 8]>, pagedT: boolean) {
  backend.ropePoolFused({ ...rope, kPool: nhd, vPool: nhd });
  backend.ropePoolFused({ ...rope, kPool: hnd, vPool: hnd, layout: 'HND' });
  backend.ropePoolFused({ ...rope, kPool: pagedT ? hnd : nhd, vPool: pagedT ? hnd : nhd, layout: pagedT ? 'HND' : 'NHD' });
  backend.dequantizeKv({ pool: hnd, slots: rope.slots, rows: backend.empty('f32', [4, 2, 8]), layout: 'HND' });
  // @ts-expect-error KV074
  backend.dequantizeKv({ pool: hnd, slots: rope.slots, rows: backend.empty('f32', [4, 2, 4]), layout: 'HND' });
  // @ts-expect-error KV036
  backend.ropePoolFused({ ...rope, kPool: nhd, vPool: backend.empty('f16', [9, 3, 8]) });
}

// --- tensorFromBits / readBits: the bits' array follows the dtype, and readBits returns the stored layout.
const bf16Bits = backend.tensorFromBits('bf16', [2, 3], new Uint16Array(6));
expectTypeOf(bf16Bits).toEqualTypeOf<Tensor<'bf16', readonly [2, 3]>>();
expectTypeOf(backend.readBits(bf16Bits)).toEqualTypeOf<Promise<Uint16Array>>();
expectTypeOf(backend.readBits(backend.tensorFromBits('f32', [2], new Float32Array(2)))).toEqualTypeOf<Promise<Uint32Array>>();
expectTypeOf(backend.readBits(backend.tensorFromBits('i64', [2], new BigInt64Array(2)))).toEqualTypeOf<Promise<BigInt64Array>>();
backend.tensorFromBits('f32', [2], new Uint32Array(2));
backend.tensorFromBits('i32', [2], new Int32Array(2));
// @ts-expect-error f32 values given as f16 bits
backend.tensorFromBits('f16', [2], new Float32Array(2));
// @ts-expect-error a number list is values: tensor() takes it
backend.tensorFromBits('bf16', [2], [16256, 16384]);
