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

// @ts-expect-error KV076: head dims above 256
backend.pagedAttention({ ...call, headDim: 512 });
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
