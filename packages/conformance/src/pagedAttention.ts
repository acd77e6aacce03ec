/**
 * The read side of the KV cache, against references written here in f64:
 * pagedAttention over pools of either layout and of the model dtype or fp8
 * (per-tensor and per-head scales), with GQA and MQA, head dims 8 to 576,
 * causal and not, sliding windows, logit soft-caps, decode, verification and
 * prefill chunks, many requests scattered over a pool and a long one, MLA's
 * latent pool read as K and (its first vHeadDim values) as V; and
 * copySlots between any pair of layouts and dtypes, in place included. A
 * backend that does not run one of the ops yet (`backend.ops`) reports its
 * cases as skipped, saying why.
 */
import { isFp8 } from '@kvkit/contracts';
import type { Backend, FloatDType, IndexDType, PoolDType, Tensor } from '@kvkit/contracts';
import { decodeFp8, encodeFp8 } from '@kvkit/contracts/backend';
import { describe, it } from 'vitest';
import { patternValues, randomPositive, randomValues, Rng, roundToDType, seedOf } from './data.js';
import { readFloats, Scope, tensorProblems, untyped } from './tensors.js';
import { Checks } from './tolerances.js';

/**
 * How close attention is (the targets): a GPU sums exp-weighted
 * rows in f32 in another order, and rounds the output once to q's dtype.
 * The log-sum-exp is f32 whatever q's dtype.
 */
export const ATTENTION_TOLERANCE: Readonly<Record<FloatDType, number>> = { f32: 1e-4, f16: 5e-3, bf16: 2e-2 };
export const LSE_TOLERANCE: Readonly<Record<FloatDType, number>> = { f32: 1e-4, f16: 1e-3, bf16: 1e-3 };

/** Whether `backend` runs `op`; where it does not, the test is skipped with the reason printed. */
export function skipUnlessRuns(ctx: { skip(condition: boolean, note?: string): void }, backend: Backend, op: string): void {
  if ((backend.ops as readonly string[]).includes(op)) return;
  const reason = `${backend.label} does not run ${op} yet (not in backend.ops)`;
  console.log(`skipped: ${reason}`);
  ctx.skip(true, reason);
}

type PoolKind = 'model' | 'fp8e4m3' | 'fp8e5m2';

export interface AttentionCase {
  readonly name: string;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  /** [qLen, kvLen] of each request. */
  readonly requests: readonly (readonly [number, number])[];
  readonly layout?: 'NHD' | 'HND';
  readonly pageSize?: number;
  readonly pool?: PoolKind;
  readonly perHead?: boolean;
  readonly causal?: boolean;
  readonly scale?: number;
  readonly slidingWindow?: number;
  readonly logitSoftcap?: number;
  /** A caller's `out`, filled with a pattern first. */
  readonly out?: boolean;
  readonly index?: IndexDType;
  /** Pool slots beyond the cached tokens, never read (their rows are random too). */
  readonly spare?: number;
  /** Queries scaled up, for sharper softmaxes. */
  readonly qMagnitude?: number;
  /** V is the first vHeadDim values of each V row. */
  readonly vHeadDim?: number;
  /** MLA: one pool (and one scale) given as both kPool and vPool. */
  readonly latent?: boolean;
  /** The q dtypes the case runs in, where not all (queries past f16's range). */
  readonly dtypes?: readonly FloatDType[];
}

const many = (count: number, f: (b: number) => readonly [number, number]) => Array.from({ length: count }, (_, b) => f(b));

export const ATTENTION_CASES: readonly AttentionCase[] = [
  { name: 'decode, MHA, D=8', Hq: 4, H: 4, D: 8, requests: [[1, 1], [1, 3], [1, 7], [1, 16], [1, 33]] },
  { name: 'decode, GQA 4:1, D=64', Hq: 8, H: 2, D: 64, requests: many(6, (b) => [1, 5 + 19 * b]) },
  { name: 'decode, MQA 8:1, D=128', Hq: 8, H: 1, D: 128, requests: [[1, 2], [1, 57], [1, 130]] },
  { name: 'verification, qLen 2-16, GQA 2:1, D=128', Hq: 4, H: 2, D: 128, requests: [[2, 40], [5, 5], [8, 30], [16, 64], [3, 9]] },
  { name: 'prefill chunks (whole and continued), D=64', Hq: 4, H: 2, D: 64, requests: [[24, 24], [16, 48], [1, 1]] },
  { name: 'head dim 256, GQA 2:1', Hq: 4, H: 2, D: 256, requests: [[1, 20], [4, 12]] },
  { name: 'head dim 80 (not a tuned size)', Hq: 2, H: 1, D: 80, requests: [[3, 17]] },
  { name: 'HND pages of 16, GQA 4:1, D=64', Hq: 8, H: 2, D: 64, layout: 'HND', pageSize: 16, requests: [[1, 40], [4, 33], [2, 2]], spare: 30 },
  { name: 'HND pages of 5, D=8', Hq: 3, H: 3, D: 8, layout: 'HND', pageSize: 5, requests: [[2, 11], [1, 4]], spare: 6 },
  { name: 'not causal', Hq: 4, H: 2, D: 16, causal: false, requests: [[3, 10], [4, 4], [1, 6]] },
  { name: 'sliding window 8, causal', Hq: 4, H: 1, D: 32, slidingWindow: 8, requests: [[1, 30], [6, 20], [12, 12], [3, 5]] },
  { name: 'sliding window 5, not causal', Hq: 2, H: 2, D: 16, slidingWindow: 5, causal: false, requests: [[4, 12], [2, 3]] },
  { name: 'window of 1: each query sees only itself', Hq: 2, H: 1, D: 8, slidingWindow: 1, requests: [[3, 7]] },
  { name: 'logit soft-cap 5, scale 1, sharp queries', Hq: 4, H: 2, D: 64, logitSoftcap: 5, scale: 1, qMagnitude: 2, requests: [[1, 25], [4, 16]] },
  { name: 'scale 0.05 (flat softmax)', Hq: 2, H: 1, D: 32, scale: 0.05, requests: [[2, 19]] },
  { name: 'fp8e4m3 pools, per-tensor scale, NHD', Hq: 8, H: 2, D: 64, pool: 'fp8e4m3', requests: [[1, 31], [3, 20]] },
  { name: 'fp8e4m3 pools, per-head scales, HND pages of 8', Hq: 8, H: 4, D: 32, pool: 'fp8e4m3', perHead: true, layout: 'HND', pageSize: 8, requests: [[1, 9], [2, 26]], spare: 5 },
  { name: 'fp8e5m2 pools, per-tensor scale, HND pages of 4', Hq: 4, H: 1, D: 128, pool: 'fp8e5m2', layout: 'HND', pageSize: 4, requests: [[4, 18], [1, 3]] },
  { name: 'fp8e4m3 decode, D=128, GQA 4:1, per-head scales, a long request and short ones', Hq: 8, H: 2, D: 128, pool: 'fp8e4m3', perHead: true, requests: [[1, 1200], [1, 7], [2, 50]] },
  { name: "queries past f16's range over fp8e5m2 pools, D=128, scale 1e-6", Hq: 8, H: 2, D: 128, pool: 'fp8e5m2', scale: 1e-6, qMagnitude: 131072, dtypes: ['f32', 'bf16'], requests: [[1, 40], [1, 90]] },
  { name: 'fp8e5m2 pools, per-head scales, NHD, soft-cap', Hq: 6, H: 3, D: 16, pool: 'fp8e5m2', perHead: true, logitSoftcap: 10, requests: [[2, 13], [1, 1]] },
  { name: 'requests with no queries, and with no tokens at all', Hq: 2, H: 1, D: 8, requests: [[0, 0], [1, 5], [0, 7], [2, 2], [0, 0]] },
  { name: 'no queries at all (N = 0)', Hq: 2, H: 1, D: 8, requests: [[0, 3]] },
  { name: 'many requests scattered over the pool, i64 indices', Hq: 4, H: 2, D: 32, index: 'i64', requests: many(32, (b) => [1 + (b % 4), 4 + ((b * 7) % 23)]), spare: 200 },
  { name: "a caller's out", Hq: 4, H: 2, D: 16, out: true, requests: [[2, 6], [1, 9]] },
  { name: 'a long request: 4096 cached tokens, decode and 8 queries', Hq: 4, H: 1, D: 64, requests: [[1, 4096], [8, 4096]] },
  { name: 'MLA decode: one latent head of 512 + 64 as K, its first 512 as V, 16 query heads', Hq: 16, H: 1, D: 576, vHeadDim: 512, latent: true, scale: 0.1, requests: [[1, 40], [1, 3], [1, 300]] },
  { name: 'MLA verification in an fp8e4m3 HND latent pool, pages of 16', Hq: 8, H: 1, D: 576, vHeadDim: 512, latent: true, pool: 'fp8e4m3', layout: 'HND', pageSize: 16, scale: 0.1, requests: [[4, 37], [2, 2]], spare: 20 },
  { name: 'MLA, small latent (32 + 8), fp8e5m2 NHD, prefill chunk', Hq: 4, H: 1, D: 40, vHeadDim: 32, latent: true, pool: 'fp8e5m2', requests: [[9, 12], [1, 5]] },
  { name: 'MLA decode of one long request, split over the device and merged', Hq: 16, H: 1, D: 576, vHeadDim: 512, latent: true, scale: 0.1, requests: [[1, 1800]] },
  { name: 'vHeadDim 40 of 64 from separate pools, GQA 2:1', Hq: 4, H: 2, D: 64, vHeadDim: 40, requests: [[2, 20], [1, 9]] },
  { name: 'vHeadDim 40 of 64, one long request split and merged', Hq: 4, H: 2, D: 64, vHeadDim: 40, requests: [[1, 1500]] },
  { name: 'vHeadDim 3 of 8 (odd)', Hq: 2, H: 1, D: 8, vHeadDim: 3, requests: [[1, 6], [2, 4]], out: true },
  { name: 'head dim 320 (above 256)', Hq: 2, H: 1, D: 320, requests: [[1, 33], [3, 8]] },
];

const label = (c: AttentionCase, dtype: FloatDType) => `${c.name} [${dtype}]`;

/** Where head h of slot s starts in a pool, written from the layout rule rather than taken from the backend layer. */
export function rowStart(layout: 'NHD' | 'HND', pageSize: number, H: number, D: number, slot: number, head: number): number {
  if (layout === 'NHD') return (slot * H + head) * D;
  const page = Math.trunc(slot / pageSize);
  return ((page * H + head) * pageSize + (slot % pageSize)) * D;
}

export interface AttentionInputs {
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly layout: 'NHD' | 'HND';
  readonly pageSize: number;
  /** Values as the tensors hold them (fp8: decoded, the scale not applied). */
  readonly q: ArrayLike<number>;
  readonly k: ArrayLike<number>;
  readonly v: ArrayLike<number>;
  /** Per head; undefined for model-dtype pools. */
  readonly kScale?: readonly number[];
  readonly vScale?: readonly number[];
  readonly qIndptr: readonly number[];
  readonly kvIndptr: readonly number[];
  readonly kvSlots: readonly number[];
  readonly causal: boolean;
  readonly scale: number;
  readonly slidingWindow?: number;
  readonly logitSoftcap?: number;
  /** V is the first Dv values of each V row (D where absent). */
  readonly Dv?: number;
}

/**
 * The f64 reference: for every query and query head, one pass of the online
 * softmax over all of its request's tokens, each tested against the mask (a
 * query at position p = kvLen - qLen + i sees token j where j <= p when
 * causal, and p - j < window with a sliding window). fp8 rows are
 * decode(code) · scale rounded to f32, as dequantizeKv gives them.
 */
export function pagedAttentionOracle(x: AttentionInputs): { out: Float64Array; lse: Float64Array } {
  const { Hq, H, D } = x;
  const Dv = x.Dv ?? D;
  const N = x.qIndptr.at(-1) ?? 0;
  const out = new Float64Array(N * Hq * Dv);
  const lse = new Float64Array(N * Hq);
  const value = (pool: ArrayLike<number>, scales: readonly number[] | undefined, at: number, head: number) =>
    scales === undefined ? pool[at]! : Math.fround(pool[at]! * scales[head]!);
  const acc = new Float64Array(Dv);
  for (let b = 0; b + 1 < x.qIndptr.length; b++) {
    const [q0, q1, k0, k1] = [x.qIndptr[b]!, x.qIndptr[b + 1]!, x.kvIndptr[b]!, x.kvIndptr[b + 1]!];
    const qLen = q1 - q0;
    const kvLen = k1 - k0;
    for (let i = 0; i < qLen; i++) {
      const p = kvLen - qLen + i;
      for (let hq = 0; hq < Hq; hq++) {
        const head = Math.floor(hq / (Hq / H));
        const qAt = ((q0 + i) * Hq + hq) * D;
        let m = -Infinity;
        let l = 0;
        acc.fill(0);
        for (let j = 0; j < kvLen; j++) {
          if (x.causal && j > p) continue;
          if (x.slidingWindow !== undefined && p - j >= x.slidingWindow) continue;
          const at = rowStart(x.layout, x.pageSize, H, D, x.kvSlots[k0 + j]!, head);
          let s = 0;
          for (let d = 0; d < D; d++) s += x.q[qAt + d]! * value(x.k, x.kScale, at + d, head);
          s *= x.scale;
          if (x.logitSoftcap !== undefined) s = x.logitSoftcap * Math.tanh(s / x.logitSoftcap);
          const mNew = Math.max(m, s);
          const shrink = Math.exp(m - mNew);
          const w = Math.exp(s - mNew);
          l = l * shrink + w;
          for (let d = 0; d < Dv; d++) acc[d] = acc[d]! * shrink + w * value(x.v, x.vScale, at + d, head);
          m = mNew;
        }
        for (let d = 0; d < Dv; d++) out[((q0 + i) * Hq + hq) * Dv + d] = acc[d]! / l;
        lse[(q0 + i) * Hq + hq] = m + Math.log(l);
      }
    }
  }
  return { out, lse };
}

function prefixSum(lengths: readonly number[]): number[] {
  const offsets = [0];
  for (const n of lengths) offsets.push(offsets.at(-1)! + n);
  return offsets;
}

/** The case's call on `backend` in q's dtype `dtype`, checked against the f64 reference. */
export async function runAttentionCase(backend: Backend, c: AttentionCase, dtype: FloatDType): Promise<void> {
  const checks = new Checks(`pagedAttention ${label(c, dtype)}`);
  const s = new Scope(backend);
  try {
    const rng = new Rng(seedOf(`paged attention ${c.name}`));
    const { Hq, H, D } = c;
    const layout = c.layout ?? 'NHD';
    const qIndptr = prefixSum(c.requests.map(([q]) => q));
    const kvIndptr = prefixSum(c.requests.map(([, kv]) => kv));
    const N = qIndptr.at(-1)!;
    const C = kvIndptr.at(-1)!;
    const pageSize = c.pageSize ?? 1;
    const S = Math.max(pageSize, Math.ceil((C + (c.spare ?? 0)) / pageSize) * pageSize);
    // Each cached token a distinct slot anywhere in the pool, so neighbours in a request are far apart.
    const kvSlots = rng.shuffle(Array.from({ length: S }, (_, i) => i)).slice(0, C);
    const poolType: PoolDType = c.pool === undefined || c.pool === 'model' ? dtype : c.pool;
    const poolShape = layout === 'NHD' ? [S, H, D] : [S / pageSize, H, pageSize, D];
    const index = c.index ?? 'i32';
    const groups = c.perHead ? H : 1;
    const fp8 = isFp8(poolType);
    const Dv = c.vHeadDim ?? D;
    const kPool = s.float(poolType, poolShape, randomValues(rng, S * H * D));
    const kScaleTensor = fp8 ? s.float('f32', [groups], randomPositive(rng, groups, 0.25, 2)) : undefined;
    const args = {
      q: s.float(dtype, [N, Hq, D], randomValues(rng, N * Hq * D, 0.125 * (c.qMagnitude ?? 1), c.qMagnitude ?? 1)),
      kPool,
      vPool: c.latent ? kPool : s.float(poolType, poolShape, randomValues(rng, S * H * D)),
      ...(fp8 ? { kScale: kScaleTensor, vScale: c.latent ? kScaleTensor : s.float('f32', [groups], randomPositive(rng, groups, 0.25, 2)) } : {}),
      ...(c.vHeadDim !== undefined ? { vHeadDim: c.vHeadDim } : {}),
      qIndptr: s.index(index, [qIndptr.length], qIndptr),
      kvIndptr: s.index(index, [kvIndptr.length], kvIndptr),
      kvSlots: s.index(index, [C], kvSlots),
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      ...(c.layout ? { layout } : {}),
      ...(c.causal !== undefined ? { causal: c.causal } : {}),
      ...(c.scale !== undefined ? { scale: c.scale } : {}),
      ...(c.slidingWindow !== undefined ? { slidingWindow: c.slidingWindow } : {}),
      ...(c.logitSoftcap !== undefined ? { logitSoftcap: c.logitSoftcap } : {}),
      ...(c.out ? { out: s.float(dtype, [N, Hq, Dv], patternValues(N * Hq * Dv)) } : {}),
    };
    const result = untyped(backend).pagedAttention(args);
    s.track(result.out);
    s.track(result.lse);
    checks.that(tensorProblems(result.out, dtype, [N, Hq, Dv], backend).length === 0, `out: ${tensorProblems(result.out, dtype, [N, Hq, Dv], backend).join('; ')}`);
    checks.that(tensorProblems(result.lse, 'f32', [N, Hq], backend).length === 0, `lse: ${tensorProblems(result.lse, 'f32', [N, Hq], backend).join('; ')}`);
    if (c.out) checks.that(result.out === args.out, "out is not the caller's tensor");
    const spread = (t: Tensor | undefined) => (t ? readFloats(backend, t).then((x) => Array.from({ length: H }, (_, h) => x[x.length === 1 ? 0 : h]!)) : Promise.resolve(undefined));
    const [out, lse, q, k, v, kScale, vScale] = await Promise.all([
      readFloats(backend, result.out),
      readFloats(backend, result.lse),
      readFloats(backend, args.q),
      readFloats(backend, args.kPool),
      readFloats(backend, args.vPool),
      spread(args.kScale),
      spread(args.vScale),
    ]);
    const scale = c.scale ?? 1 / Math.sqrt(D);
    const expected = pagedAttentionOracle({ Hq, H, D, Dv, layout, pageSize, q, k, v, kScale, vScale, qIndptr, kvIndptr, kvSlots, causal: c.causal ?? true, scale, slidingWindow: c.slidingWindow, logitSoftcap: c.logitSoftcap });
    checks.close('out', out, expected.out, ATTENTION_TOLERANCE[dtype], { shape: [N, Hq, Dv], axes: ['n', 'hq', 'd'] });
    checks.close('lse', lse, expected.lse, LSE_TOLERANCE[dtype], { shape: [N, Hq], axes: ['n', 'hq'] });
  } finally {
    s.dispose();
  }
  checks.done();
}

export interface CopyCase {
  readonly name: string;
  readonly H: number;
  readonly D: number;
  readonly src: { readonly layout: 'NHD' | 'HND'; readonly dtype: PoolDType; readonly slots: number; readonly pageSize?: number; readonly perHead?: boolean };
  readonly dst: { readonly layout: 'NHD' | 'HND'; readonly dtype: PoolDType; readonly slots: number; readonly pageSize?: number; readonly perHead?: boolean };
  /** [from, to] of each pair; negative skips. */
  readonly pairs: readonly (readonly [number, number])[];
  /** The destination is the source itself (compaction); its dtype and layout are the source's. */
  readonly inPlace?: boolean;
  /** fp8 destination scales equal to the source's, so same-dtype fp8 rows keep their bytes. */
  readonly sameScales?: boolean;
  readonly index?: IndexDType;
}

export const COPY_CASES: readonly CopyCase[] = [
  { name: 'bf16 NHD to bf16 NHD: prefix sharing, bits as they are', H: 2, D: 8, src: { layout: 'NHD', dtype: 'bf16', slots: 16 }, dst: { layout: 'NHD', dtype: 'bf16', slots: 12 }, pairs: [[0, 11], [5, 3], [15, 0], [7, 7]] },
  { name: 'f16 NHD to f16 HND pages of 4', H: 3, D: 6, src: { layout: 'NHD', dtype: 'f16', slots: 10 }, dst: { layout: 'HND', dtype: 'f16', slots: 12, pageSize: 4 }, pairs: [[9, 0], [1, 5], [2, 11], [3, 6]] },
  { name: 'f32 HND pages of 8 to bf16 NHD (rounded once)', H: 2, D: 16, src: { layout: 'HND', dtype: 'f32', slots: 24, pageSize: 8 }, dst: { layout: 'NHD', dtype: 'bf16', slots: 9 }, pairs: [[23, 8], [0, 0], [12, 4]], index: 'i64' },
  { name: 'bf16 to f32 (exact)', H: 1, D: 8, src: { layout: 'NHD', dtype: 'bf16', slots: 6 }, dst: { layout: 'NHD', dtype: 'f32', slots: 6 }, pairs: [[0, 1], [1, 2], [2, 3]] },
  { name: 'bf16 NHD to fp8e4m3 HND, per-head scales (quantised)', H: 2, D: 8, src: { layout: 'NHD', dtype: 'bf16', slots: 8 }, dst: { layout: 'HND', dtype: 'fp8e4m3', slots: 8, pageSize: 2, perHead: true }, pairs: [[0, 7], [3, 1], [6, 4]] },
  { name: 'fp8e4m3 HND to fp8e4m3 HND, same scales: bytes kept', H: 2, D: 16, src: { layout: 'HND', dtype: 'fp8e4m3', slots: 16, pageSize: 4, perHead: true }, dst: { layout: 'HND', dtype: 'fp8e4m3', slots: 16, pageSize: 4, perHead: true }, sameScales: true, pairs: [[0, 4], [1, 5], [2, 6], [3, 7]] },
  { name: 'fp8e4m3 to fp8e4m3, other scales: re-encoded', H: 2, D: 8, src: { layout: 'NHD', dtype: 'fp8e4m3', slots: 8 }, dst: { layout: 'NHD', dtype: 'fp8e4m3', slots: 8, perHead: true }, pairs: [[1, 2], [5, 6]] },
  { name: 'fp8e4m3 per-head to fp8e5m2 per-tensor, NHD to HND', H: 3, D: 8, src: { layout: 'NHD', dtype: 'fp8e4m3', slots: 12, perHead: true }, dst: { layout: 'HND', dtype: 'fp8e5m2', slots: 12, pageSize: 3 }, pairs: [[11, 0], [4, 4], [0, 11]] },
  { name: 'fp8e5m2 HND to bf16 NHD (dequantised)', H: 2, D: 8, src: { layout: 'HND', dtype: 'fp8e5m2', slots: 8, pageSize: 4, perHead: true }, dst: { layout: 'NHD', dtype: 'bf16', slots: 8 }, pairs: [[7, 0], [2, 3]] },
  { name: 'negative slots skip; duplicate destinations: the last pair writes', H: 2, D: 8, src: { layout: 'NHD', dtype: 'f32', slots: 8 }, dst: { layout: 'HND', dtype: 'f32', slots: 8, pageSize: 4 }, pairs: [[0, 3], [-1, 4], [5, -2], [1, 3], [2, 6], [7, 6]] },
  { name: 'a skipped pair after the pairs naming its destination: the last pair not skipped writes it', H: 2, D: 4, src: { layout: 'NHD', dtype: 'f32', slots: 6 }, dst: { layout: 'NHD', dtype: 'f32', slots: 4 }, pairs: [[1, 0], [-1, 0], [4, 2], [3, 2], [-3, 2], [5, 3]] },
  { name: 'in place (compaction): sources read as they were before the call', H: 2, D: 8, src: { layout: 'HND', dtype: 'bf16', slots: 12, pageSize: 4 }, dst: { layout: 'HND', dtype: 'bf16', slots: 12, pageSize: 4 }, inPlace: true, pairs: [[4, 0], [0, 4], [8, 1], [1, 9], [9, 8]] },
];

/** Storage codes of a pool as comparable numbers: fp8 bytes, else the stored values (exact in f32). */
async function poolContents(backend: Backend, t: Tensor): Promise<Float32Array> {
  if (isFp8(t.dtype)) return Float32Array.from(await backend.readBits(t as Tensor<'fp8e4m3'>));
  return readFloats(backend, t);
}

export async function runCopyCase(backend: Backend, c: CopyCase): Promise<void> {
  const checks = new Checks(`copySlots ${c.name}`);
  const s = new Scope(backend);
  try {
    const rng = new Rng(seedOf(`copy slots ${c.name}`));
    const { H, D } = c;
    const src = c.src;
    const dst = c.inPlace ? c.src : c.dst;
    const shape = (p: CopyCase['src']) => (p.layout === 'NHD' ? [p.slots, H, D] : [p.slots / p.pageSize!, H, p.pageSize!, D]);
    const scales = (p: CopyCase['src']) => (isFp8(p.dtype) ? [0, 1].map(() => randomPositive(rng, p.perHead ? H : 1, 0.02, 0.2)) : undefined);
    const pools = (p: CopyCase['src'], fill: (n: number) => Float32Array) => [0, 1].map(() => s.float(p.dtype, shape(p), fill(p.slots * H * D)));
    const [kSrc, vSrc] = pools(src, (n) => randomValues(rng, n, 0.01, 20));
    const srcScales = scales(src);
    const [kDst, vDst] = c.inPlace ? [kSrc!, vSrc!] : pools(dst, (n) => patternValues(n).map((x) => x / 64));
    const dstScales = c.inPlace ? srcScales : c.sameScales ? srcScales : scales(dst);
    const scaleTensors = (which: 'Src' | 'Dst', values: Float32Array[] | undefined) =>
      values ? { [`k${which}Scale`]: s.float('f32', [values[0]!.length], values[0]!), [`v${which}Scale`]: s.float('f32', [values[1]!.length], values[1]!) } : {};
    const index = c.index ?? 'i32';
    const from = c.pairs.map(([f]) => f);
    const to = c.pairs.map(([, t]) => t);
    const before = await Promise.all([kSrc!, vSrc!, kDst!, vDst!].map((t) => poolContents(backend, t)));
    untyped(backend).copySlots({
      kSrc,
      vSrc,
      kDst,
      vDst,
      ...scaleTensors('Src', srcScales),
      ...(c.inPlace ? scaleTensors('Dst', srcScales) : scaleTensors('Dst', dstScales)),
      ...(src.layout !== 'NHD' ? { srcLayout: src.layout } : {}),
      ...(dst.layout !== 'NHD' ? { dstLayout: dst.layout } : {}),
      fromSlots: s.index(index, [from.length], from),
      toSlots: s.index(index, [to.length], to),
    });
    const after = await Promise.all([kDst!, vDst!].map((t) => poolContents(backend, t)));
    for (const which of [0, 1] as const) {
      const expected = Float32Array.from(before[2 + which]!);
      const srcStart = (slot: number, h: number) => rowStart(src.layout, src.pageSize ?? 1, H, D, slot, h);
      const dstStart = (slot: number, h: number) => rowStart(dst.layout, dst.pageSize ?? 1, H, D, slot, h);
      const scaleOf = (scales: Float32Array | undefined, h: number) => (scales === undefined ? undefined : scales[scales.length === 1 ? 0 : h]);
      const srcScale = (h: number) => scaleOf(srcScales?.[which], h);
      const dstScale = (h: number) => scaleOf(dstScales?.[which], h);
      for (const [f, t] of c.pairs) {
        if (f < 0 || t < 0) continue;
        for (let h = 0; h < H; h++) {
          for (let d = 0; d < D; d++) {
            // `before` holds the source as it was: in place, rows written by earlier pairs are not read back.
            const stored = before[which]![srcStart(f, h) + d]!;
            const at = dstStart(t, h) + d;
            if (src.dtype === dst.dtype && (!isFp8(src.dtype) || srcScale(h) === dstScale(h))) {
              expected[at] = stored;
              continue;
            }
            const x = isFp8(src.dtype) ? Math.fround(decodeFp8(src.dtype, stored) * srcScale(h)!) : stored;
            expected[at] = isFp8(dst.dtype) ? encodeFp8(dst.dtype, Math.fround(x / dstScale(h)!)) : roundToDType([x], dst.dtype as FloatDType)[0]!;
          }
        }
      }
      checks.exact(`${which === 0 ? 'kDst' : 'vDst'} (${isFp8(dst.dtype) ? 'fp8 codes' : 'values'})`, after[which]!, expected);
    }
    if (!c.inPlace) {
      const sources = await Promise.all([kSrc!, vSrc!].map((t) => poolContents(backend, t)));
      checks.exact('kSrc, unchanged', sources[0]!, before[0]!);
      checks.exact('vSrc, unchanged', sources[1]!, before[1]!);
    }
  } finally {
    s.dispose();
  }
  checks.done();
}

/** Registers the cases; each is skipped, with the reason, on a backend that does not run its op. */
export function describePagedReads(backendOf: () => Backend, dtypes: readonly FloatDType[], timeout: number): void {
  describe('pagedAttention, against the f64 reference', () => {
    for (const c of ATTENTION_CASES) {
      for (const dtype of dtypes.filter((d) => c.dtypes?.includes(d) ?? true)) {
        it(label(c, dtype), async (ctx) => {
          skipUnlessRuns(ctx, backendOf(), 'pagedAttention');
          await runAttentionCase(backendOf(), c, dtype);
        }, timeout);
      }
    }
  });
  describe('copySlots, against the f64 reference (bits, or codes for fp8)', () => {
    for (const c of COPY_CASES) {
      it(c.name, async (ctx) => {
        skipUnlessRuns(ctx, backendOf(), 'copySlots');
        await runCopyCase(backendOf(), c);
      }, timeout);
    }
  });
}
