import { BOUND, FIXTURE } from './fixture.js';
import type { Fixture } from './fixture.js';
import type { ValidationCase } from './validation-cases.js';

/** mlaPoolFused's checks (ops/mlaPoolFused.ts) and pagedAttention's vHeadDim, one changed thing each in the fixture's valid calls. */
const { N, Hq, S, C, R, Dq, H, D } = FIXTURE;
const W = C + R;

const mla = (fx: Fixture, over: Record<string, unknown>) => (fx.backend.mlaPoolFused as (a: unknown) => unknown)(fx.mlaArgs(over));
const attend = (fx: Fixture, over: Record<string, unknown>) => (fx.backend.pagedAttention as (a: unknown) => unknown)(fx.attentionArgs(over));

export const mlaValidationCases: readonly ValidationCase[] = [
  { code: 'KV090', op: 'mlaPoolFused', name: 'kvLatent one value too wide', arg: 'kvLatent', mentions: [`[N, C+R] = [${N}, ${W}]`], dims: BOUND.mlaParams, call: (fx) => mla(fx, { kvLatent: fx.float('f32', [N, W + 1]) }) },
  { code: 'KV090', op: 'mlaPoolFused', name: 'kvLatent as [N, 1, C + R]', arg: 'kvLatent', call: (fx) => mla(fx, { kvLatent: fx.float('f32', [N, 1, W]) }) },
  { code: 'KV091', op: 'mlaPoolFused', name: 'kvNormWeight over the whole row [C + R]', arg: 'kvNormWeight', mentions: [`[C] = [${C}]`], call: (fx) => mla(fx, { kvNormWeight: fx.float('f32', [W]) }) },
  { code: 'KV005', op: 'mlaPoolFused', name: 'kvNormWeight f16 with kvLatent f32', arg: 'kvNormWeight', call: (fx) => mla(fx, { kvNormWeight: fx.float('f16', [C]) }) },
  { code: 'KV092', op: 'mlaPoolFused', name: 'q with one head more than numQoHeads', arg: 'q', mentions: [`[${N}, ${Hq + 1}, ${Dq}]`], call: (fx) => mla(fx, { q: fx.float('f32', [N, Hq + 1, Dq]) }) },
  { code: 'KV092', op: 'mlaPoolFused', name: 'q as [N, Hq * Dq]', arg: 'q', call: (fx) => mla(fx, { q: fx.float('f32', [N, Hq * Dq]) }) },
  { code: 'KV093', op: 'mlaPoolFused', name: "q's heads narrower than qkRopeHeadDim", arg: 'q', mentions: [`qkRopeHeadDim = ${R}`, `head dim ${R - 2}`], dims: { C, R, Hq, N }, call: (fx) => mla(fx, { q: fx.float('f32', [N, Hq, R - 2]) }) },
  { code: 'KV096', op: 'mlaPoolFused', name: 'qkRopeHeadDim = 3', arg: 'qkRopeHeadDim', mentions: ['3'], call: (fx) => mla(fx, { qkRopeHeadDim: 3 }) },
  { code: 'KV006', op: 'mlaPoolFused', name: 'kvLoraRank = 0', arg: 'kvLoraRank', call: (fx) => mla(fx, { kvLoraRank: 0 }) },
  { code: 'KV008', op: 'mlaPoolFused', name: 'eps = -1e-6', arg: 'eps', call: (fx) => mla(fx, { eps: -1e-6 }) },
  { code: 'KV009', op: 'mlaPoolFused', name: "ropeStyle = 'interleaved'", arg: 'ropeStyle', call: (fx) => mla(fx, { ropeStyle: 'interleaved' }) },
  { code: 'KV094', op: 'mlaPoolFused', name: "the pool as vLLM's [S, C + R], unviewed", arg: 'pool', mentions: [`[S, 1, C+R]`], call: (fx) => mla(fx, { pool: fx.float('f32', [S, W]) }) },
  { code: 'KV094', op: 'mlaPoolFused', name: 'a pool of two heads', arg: 'pool', call: (fx) => mla(fx, { pool: fx.float('f32', [S, 2, W]) }) },
  { code: 'KV094', op: 'mlaPoolFused', name: "an NHD pool with layout 'HND'", arg: 'pool', mentions: ['numPages', 'pageSize'], call: (fx) => mla(fx, { layout: 'HND' }) },
  { code: 'KV095', op: 'mlaPoolFused', name: 'an fp8e4m3 pool without its scale', arg: 'scale', mentions: ['fp8e4m3'], call: (fx) => mla(fx, { pool: fx.float('fp8e4m3', [S, 1, W]) }) },
  { code: 'KV071', op: 'mlaPoolFused', name: 'a scale with an f32 pool', arg: 'scale', call: (fx) => mla(fx, { scale: fx.float('f32', [1]) }) },
  { code: 'KV072', op: 'mlaPoolFused', name: 'a scale of two values', arg: 'scale', call: (fx) => mla(fx, { pool: fx.float('fp8e5m2', [S, 1, W]), scale: fx.float('f32', [2]) }) },
  {
    code: 'KV039',
    op: 'mlaPoolFused',
    name: 'kvLatent a view of the pool',
    arg: 'pool',
    mentions: ['kvLatent'],
    call: (fx) => {
      const pool = fx.float('f32', [S, 1, W]);
      return mla(fx, { pool, kvLatent: fx.backend.view(pool, [N, W]) });
    },
  },
  { code: 'KV048', op: 'mlaPoolFused', name: 'the pool a strided view', arg: 'pool', call: (fx) => mla(fx, { pool: fx.backend.view(fx.float('f32', [2 * S * W]), [S, 1, W], { strides: [2 * W, W, 1] }) }) },
  { code: 'KV038', op: 'mlaPoolFused', name: 'slots[2] = S', arg: 'slots', mentions: [`slots[2] = ${S}`], dims: BOUND.mla, deferred: true, call: (fx) => mla(fx, { slots: fx.index('i32', [N], [0, -1, S, 1]) }) },
  {
    code: 'KV038',
    op: 'mlaPoolFused',
    name: 'slots[3] = S into an fp8 pool whose codes go through the pool pass',
    arg: 'slots',
    mentions: [`slots[3] = ${S}`],
    dims: BOUND.mla,
    deferred: true,
    call: (fx) => mla(fx, { pool: fx.float('fp8e4m3', [S, 1, W]), scale: fx.float('f32', [1], Float32Array.of(0.5)), slots: fx.index('i64', [N], [0, 1, 2, S]) }),
  },
  {
    code: 'KV019',
    op: 'mlaPoolFused',
    name: 'an fp8 pool with a scale of 0',
    arg: 'scale',
    deferred: true,
    call: (fx) => mla(fx, { pool: fx.float('fp8e4m3', [S, 1, W]), scale: fx.float('f32', [1], Float32Array.of(0)) }),
  },
  { code: 'KV097', op: 'pagedAttention', name: 'vHeadDim = headDim + 1', arg: 'vHeadDim', mentions: [`headDim = ${D}`], dims: { H, Hq, D }, call: (fx) => attend(fx, { vHeadDim: D + 1 }) },
  { code: 'KV081', op: 'pagedAttention', name: 'out [N, Hq, D] with vHeadDim = D / 2', arg: 'out', mentions: [`[${N}, ${Hq}, ${D / 2}]`], call: (fx) => attend(fx, { vHeadDim: D / 2 }) },
];
