/** Compile-time checks of pagedAttention and copySlots, verified by `tsc --noEmit` as signatures.typetest.ts is. */
import { expectTypeOf } from 'vitest';
import type { Backend, Tensor } from '../../src/index.js';

declare const backend: Backend;

// N=3 queries, Hq=8, H=2, D=64, an NHD pool of S=32 slots; two requests over C=7 cached tokens.
const q = backend.tensor('bf16', [3, 8, 64]);
const kPool = backend.tensor('bf16', [32, 2, 64]);
const vPool = backend.tensor('bf16', [32, 2, 64]);
const qIndptr = backend.tensor('i32', [3]);
const kvIndptr = backend.tensor('i32', [3]);
const kvSlots = backend.tensor('i32', [7]);
const call = { q, kPool, vPool, qIndptr, kvIndptr, kvSlots, numQoHeads: 8, numKvHeads: 2, headDim: 64 } as const;

const { out, lse } = backend.pagedAttention(call);
expectTypeOf(out).toEqualTypeOf<Tensor<'bf16', readonly [3, 8, 64]>>();
expectTypeOf(lse).toEqualTypeOf<Tensor<'f32', readonly [3, 8]>>();
backend.pagedAttention({ ...call, causal: false, slidingWindow: 4096, logitSoftcap: 50, scale: 0.125, out: backend.empty('bf16', [3, 8, 64]) });
backend.pagedAttention({ ...call, layout: 'HND', kPool: backend.tensor('fp8e4m3', [4, 2, 8, 64]), vPool: backend.tensor('fp8e4m3', [4, 2, 8, 64]), kScale: backend.tensor('f32', [1]), vScale: backend.tensor('f32', [2]) });

// @ts-expect-error KV076: head dims above 576
backend.pagedAttention({ ...call, headDim: 640 });

// MLA: one latent pool of 512 + 64 values a slot as K, its first 512 as V; out is [N, Hq, vHeadDim].
const latent = backend.tensor('bf16', [32, 1, 576]);
const mla = { q: backend.tensor('bf16', [3, 16, 576]), kPool: latent, vPool: latent, qIndptr, kvIndptr, kvSlots, numQoHeads: 16, numKvHeads: 1, headDim: 576, vHeadDim: 512, scale: 0.1 } as const;
expectTypeOf(backend.pagedAttention(mla).out).toEqualTypeOf<Tensor<'bf16', readonly [3, 16, 512]>>();
backend.pagedAttention({ ...mla, out: backend.empty('bf16', [3, 16, 512]) });
// @ts-expect-error KV097: V wider than K
backend.pagedAttention({ ...mla, headDim: 512, vHeadDim: 576 });
// @ts-expect-error KV081: out as wide as K where vHeadDim is narrower
backend.pagedAttention({ ...mla, out: backend.empty('bf16', [3, 16, 576]) });
// @ts-expect-error KV037: 6 query heads over 4 KV heads
backend.pagedAttention({ ...call, numQoHeads: 6, numKvHeads: 4 });
// @ts-expect-error KV077: the indptr arrays differ in length
backend.pagedAttention({ ...call, kvIndptr: backend.tensor('i32', [4]) });
// @ts-expect-error KV081: out over the KV heads
backend.pagedAttention({ ...call, out: backend.empty('bf16', [3, 2, 64]) });
// @ts-expect-error causal is a boolean
backend.pagedAttention({ ...call, causal: 1 });

const kDst = backend.tensor('fp8e5m2', [16, 2, 4, 64]);
const vDst = backend.tensor('fp8e5m2', [16, 2, 4, 64]);
backend.copySlots({ kSrc: kPool, vSrc: vPool, kDst, vDst, dstLayout: 'HND', kDstScale: backend.tensor('f32', [2]), vDstScale: backend.tensor('f32', [1]), fromSlots: kvSlots, toSlots: kvSlots });
// @ts-expect-error KV083: one destination per source slot
backend.copySlots({ kSrc: kPool, vSrc: vPool, kDst: kPool, vDst: vPool, fromSlots: kvSlots, toSlots: backend.tensor('i32', [2]) });
// @ts-expect-error KV036: the destination's H and D are the source's
backend.copySlots({ kSrc: kPool, vSrc: vPool, kDst: backend.tensor('bf16', [32, 4, 64]), vDst: vPool, fromSlots: kvSlots, toSlots: kvSlots });

// mlaPoolFused: DeepSeek-V3's latent (C = 512, R = 64) into a one-head pool, q heads of 128 + 64.
const kvLatent = backend.tensor('bf16', [3, 576]);
const kvNormWeight = backend.tensor('bf16', [512]);
const pool = backend.tensor('bf16', [32, 1, 576]);
const positions = backend.tensor('i32', [3]);
const slots = backend.tensor('i32', [3]);
const write = { kvLatent, kvNormWeight, eps: 1e-6, positions, slots, pool, kvLoraRank: 512, qkRopeHeadDim: 64, ropeBase: 10000 } as const;
const { qRot } = backend.mlaPoolFused({ ...write, q: backend.tensor('bf16', [3, 16, 192]), numQoHeads: 16 });
expectTypeOf(qRot).toEqualTypeOf<Tensor<'bf16', readonly [3, 16, 192]> | undefined>();
backend.mlaPoolFused(write);
backend.mlaPoolFused({ ...write, layout: 'HND', pool: backend.tensor('fp8e4m3', [2, 1, 16, 576]), scale: backend.tensor('f32', [1]) });
// @ts-expect-error KV090: kvLatent without its RoPE part
backend.mlaPoolFused({ ...write, kvLatent: backend.tensor('bf16', [3, 512]) });
// @ts-expect-error KV091: the norm weight over the whole row
backend.mlaPoolFused({ ...write, kvNormWeight: backend.tensor('bf16', [576]) });
// @ts-expect-error KV093: query heads narrower than the RoPE part
backend.mlaPoolFused({ ...write, q: backend.tensor('bf16', [3, 16, 32]) });
// @ts-expect-error KV092: q of another token count
backend.mlaPoolFused({ ...write, q: backend.tensor('bf16', [4, 16, 192]) });
// @ts-expect-error KV094: vLLM's cache without the head axis
backend.mlaPoolFused({ ...write, pool: backend.tensor('bf16', [32, 576]) });
// @ts-expect-error KV096: an odd RoPE part
backend.mlaPoolFused({ ...write, qkRopeHeadDim: 63 });
