import { BOUND, FIXTURE } from './fixture.js';
import type { Fixture } from './fixture.js';
import { untyped } from './tensors.js';
import type { ValidationCase } from './validation-cases.js';

/** pagedAttention's and copySlots' checks (ops/pagedAttention.ts, ops/copySlots.ts), one changed thing each in the fixture's valid calls. */
const { H, D, S, N, Hq } = FIXTURE;

const attend = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).pagedAttention(fx.attentionArgs(over));
const copy = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).copySlots(fx.copyArgs(over));
const fp8Pools = (fx: Fixture) => ({ kPool: fx.float('fp8e4m3', [S, H, D]), vPool: fx.float('fp8e4m3', [S, H, D]) });

export const pagedValidationCases: readonly ValidationCase[] = [
  // pagedAttention: parameters and shapes.
  { code: 'KV076', op: 'pagedAttention', name: 'headDim = 640', arg: 'headDim', mentions: ['640', '576'], dims: { H, Hq }, call: (fx) => attend(fx, { headDim: 640 }) },
  { code: 'KV037', op: 'pagedAttention', name: 'numQoHeads = 3 with numKvHeads = 2', arg: 'numQoHeads', call: (fx) => attend(fx, { numQoHeads: 3 }) },
  { code: 'KV006', op: 'pagedAttention', name: 'slidingWindow = 0', arg: 'slidingWindow', call: (fx) => attend(fx, { slidingWindow: 0 }) },
  { code: 'KV008', op: 'pagedAttention', name: 'scale = 0', arg: 'scale', call: (fx) => attend(fx, { scale: 0 }) },
  { code: 'KV008', op: 'pagedAttention', name: 'logitSoftcap = -30', arg: 'logitSoftcap', call: (fx) => attend(fx, { logitSoftcap: -30 }) },
  { code: 'KV044', op: 'pagedAttention', name: "causal = 'yes'", arg: 'causal', mentions: ['true or false'], call: (fx) => attend(fx, { causal: 'yes' }) },
  { code: 'KV009', op: 'pagedAttention', name: "layout = 'NDH'", arg: 'layout', call: (fx) => attend(fx, { layout: 'NDH' }) },
  { code: 'KV031', op: 'pagedAttention', name: 'q is [N, H, D] (KV heads)', arg: 'q', dims: BOUND.attentionParams, call: (fx) => attend(fx, { q: fx.float('f32', [N, H, D]) }) },
  { code: 'KV005', op: 'pagedAttention', name: 'vPool bf16 with q f32', arg: 'vPool', call: (fx) => attend(fx, { vPool: fx.float('bf16', [S, H, D]) }) },
  { code: 'KV073', op: 'pagedAttention', name: "an NHD pool with layout 'HND'", arg: 'kPool', call: (fx) => attend(fx, { layout: 'HND' }) },
  { code: 'KV070', op: 'pagedAttention', name: 'fp8 pools without scales', arg: 'kScale', call: (fx) => attend(fx, fp8Pools(fx)) },
  { code: 'KV071', op: 'pagedAttention', name: 'scales with f32 pools', arg: 'kScale', call: (fx) => attend(fx, { kScale: fx.float('f32', [1]), vScale: fx.float('f32', [1]) }) },
  {
    code: 'KV019',
    op: 'pagedAttention',
    name: 'an fp8 pool with a per-head scale of 0',
    arg: 'vScale',
    deferred: true,
    call: (fx) => attend(fx, { ...fp8Pools(fx), kScale: fx.float('f32', [1], Float32Array.of(0.5)), vScale: fx.float('f32', [H], Float32Array.of(0.5, 0)) }),
  },
  { code: 'KV077', op: 'pagedAttention', name: 'kvIndptr one entry longer than qIndptr', arg: 'kvIndptr', mentions: ['B + 1'], call: (fx) => attend(fx, { kvIndptr: fx.index('i32', [4], [0, 2, 4, 6]) }) },
  { code: 'KV077', op: 'pagedAttention', name: 'qIndptr as [B, 2] pairs', arg: 'qIndptr', call: (fx) => attend(fx, { qIndptr: fx.index('i32', [2, 2], [0, 1, 1, 4]) }) },
  { code: 'KV033', op: 'pagedAttention', name: 'kvSlots is [C, 1]', arg: 'kvSlots', call: (fx) => attend(fx, { kvSlots: fx.index('i32', [6, 1], [5, 0, 1, 2, 3, 4]) }) },
  { code: 'KV081', op: 'pagedAttention', name: 'out is [N, H, D]', arg: 'out', mentions: [`[${N}, ${H}, ${D}]`], call: (fx) => attend(fx, { out: fx.float('f32', [N, H, D]) }) },
  { code: 'KV005', op: 'pagedAttention', name: 'out f16 with q f32', arg: 'out', call: (fx) => attend(fx, { out: fx.float('f16', [N, Hq, D]) }) },
  { code: 'KV082', op: 'pagedAttention', name: 'out is q', arg: 'out', mentions: ['q'], call: (fx) => attend(fx, { out: fx.q }) },
  { code: 'KV048', op: 'pagedAttention', name: 'out a transposed view', arg: 'out', call: (fx) => attend(fx, { out: fx.backend.view(fx.backend.empty('f32', [N, D, Hq]), [N, Hq, D], { strides: [Hq * D, 1, Hq] }) }) },
  // pagedAttention: values that live on the device.
  { code: 'KV078', op: 'pagedAttention', name: 'qIndptr starts at 1', arg: 'qIndptr', mentions: ['qIndptr[0] = 1', 'start at 0'], dims: BOUND.attention, deferred: true, call: (fx) => attend(fx, { qIndptr: fx.index('i32', [3], [1, 1, 4]) }) },
  { code: 'KV078', op: 'pagedAttention', name: 'kvIndptr goes backwards (i64)', arg: 'kvIndptr', mentions: ['kvIndptr[2] = 1', 'never decrease'], deferred: true, call: (fx) => attend(fx, { kvIndptr: fx.index('i64', [3], [0, 2, 1]) }) },
  { code: 'KV078', op: 'pagedAttention', name: 'qIndptr ends below N', arg: 'qIndptr', mentions: [`N = ${N}`], deferred: true, call: (fx) => attend(fx, { qIndptr: fx.index('i32', [3], [0, 1, 3]) }) },
  { code: 'KV078', op: 'pagedAttention', name: 'kvIndptr ends past the length of kvSlots', arg: 'kvIndptr', mentions: ['C = 6'], deferred: true, call: (fx) => attend(fx, { kvIndptr: fx.index('i32', [3], [0, 2, 7]) }) },
  { code: 'KV078', op: 'pagedAttention', name: 'qIndptr and kvIndptr with no entry', arg: 'qIndptr', mentions: ['qIndptr[0] = nothing'], call: (fx) => attend(fx, { qIndptr: fx.index('i32', [0], []), kvIndptr: fx.index('i32', [0], []) }) },
  { code: 'KV079', op: 'pagedAttention', name: 'request 0 has 3 queries over 2 cached tokens', arg: 'qIndptr', mentions: ['request 0 has 3 queries', '2 cached tokens'], dims: BOUND.attention, deferred: true, call: (fx) => attend(fx, { qIndptr: fx.index('i32', [3], [0, 3, 4]) }) },
  { code: 'KV080', op: 'pagedAttention', name: 'kvSlots[5] = S', arg: 'kvSlots', mentions: [`kvSlots[5] = ${S}`], dims: BOUND.attention, deferred: true, call: (fx) => attend(fx, { kvSlots: fx.index('i32', [6], [5, 0, 1, 2, 3, S]) }) },
  { code: 'KV080', op: 'pagedAttention', name: 'a negative kvSlots entry (i64)', arg: 'kvSlots', mentions: ['kvSlots[1] = -1'], deferred: true, call: (fx) => attend(fx, { kvSlots: fx.index('i64', [6], [5, -1, 1, 2, 3, 4]) }) },
  // copySlots.
  { code: 'KV083', op: 'copySlots', name: 'one toSlot for four fromSlots', arg: 'toSlots', dims: { H, D, S, dstS: S, M: 4 }, call: (fx) => copy(fx, { toSlots: fx.index('i32', [1], [3]) }) },
  { code: 'KV033', op: 'copySlots', name: 'fromSlots is [2, 2]', arg: 'fromSlots', call: (fx) => copy(fx, { fromSlots: fx.index('i32', [2, 2], [0, 1, 2, 3]) }) },
  { code: 'KV036', op: 'copySlots', name: 'kDst with another head count', arg: 'kDst', call: (fx) => copy(fx, { kDst: fx.float('f32', [S, H + 1, D]) }) },
  { code: 'KV073', op: 'copySlots', name: "an NHD destination with dstLayout 'HND'", arg: 'kDst', call: (fx) => copy(fx, { dstLayout: 'HND' }) },
  { code: 'KV005', op: 'copySlots', name: 'vDst f16 with kDst f32', arg: 'vDst', call: (fx) => copy(fx, { vDst: fx.float('f16', [S, H, D]) }) },
  { code: 'KV070', op: 'copySlots', name: 'fp8 destination without kDstScale', arg: 'kDstScale', call: (fx) => copy(fx, { kDst: fx.float('fp8e5m2', [S, H, D]), vDst: fx.float('fp8e5m2', [S, H, D]) }) },
  { code: 'KV071', op: 'copySlots', name: 'kSrcScale with an f32 source', arg: 'kSrcScale', call: (fx) => copy(fx, { kSrcScale: fx.float('f32', [1]), vSrcScale: fx.float('f32', [1]) }) },
  { code: 'KV039', op: 'copySlots', name: 'kDst === vDst', arg: 'kDst', mentions: ['vDst'], call: (fx) => copy(fx, { vDst: fx.kCopy }) },
  { code: 'KV038', op: 'copySlots', name: 'fromSlots[2] = S', arg: 'fromSlots', mentions: [`fromSlots[2] = ${S}`], dims: BOUND.copy, deferred: true, call: (fx) => copy(fx, { fromSlots: fx.index('i32', [4], [0, 1, S, 3]) }) },
  { code: 'KV038', op: 'copySlots', name: 'toSlots[3] = S (i64)', arg: 'toSlots', mentions: [`toSlots[3] = ${S}`], deferred: true, call: (fx) => copy(fx, { toSlots: fx.index('i64', [4], [2, -1, 1, S]) }) },
];
