/**
 * mlaPoolFused (MLA's latent cache write) against a reference written here in
 * f64 from the docs page, not from any backend: pools of one head in both
 * layouts, of the model dtype and of fp8, with duplicate and negative slots,
 * with and without queries, narrow shapes (element paths) and DeepSeek-V3's
 * own (C = 512, R = 64, q heads of 128 + 64, YaRN factor 40), and inputs
 * that are views of wider projections.
 */
import { isFp8 } from '@kvkit/contracts';
import type { Backend, FloatDType, Fp8DType, IndexDType, PoolDType, RopeScaling, Tensor } from '@kvkit/contracts';
import { decodeFp8, encodeFp8, ropeAngles } from '@kvkit/contracts/backend';
import { describe, it } from 'vitest';
import type { RopeStyle } from './cases.js';
import { patternValues, randomPositive, randomValues, Rng, seedOf } from './data.js';
import { rotate } from './oracle.js';
import { readFloats, Scope } from './tensors.js';
import { Checks, ropeBaseTolerance } from './tolerances.js';

export interface MlaInputs {
  readonly N: number;
  readonly C: number;
  readonly R: number;
  readonly Hq: number;
  readonly Dq: number;
  readonly ropeStyle: RopeStyle;
  readonly ropeBase: number;
  readonly ropeScaling?: RopeScaling;
  readonly angles?: 'exact' | 'float32';
  /** `[N, C + R]` as the tensor holds it. */
  readonly kvLatent: ArrayLike<number>;
  /** `[C]` */
  readonly kvNormWeight: ArrayLike<number>;
  readonly eps: number;
  /** `[N, Hq, Dq]`, or undefined without queries. */
  readonly q?: ArrayLike<number>;
  readonly positions: readonly number[];
}

/**
 * The docs page's formula, unrounded. Row n of the pool, C + R values:
 *   row[i]     = c[i] · inv · w[i]                  i < C, c = kvLatent[n, 0:C], inv = 1 / sqrt(mean(c²) + eps)
 *   row[C + .] = rope(kvLatent[n, C:C+R])           pairs (2j, 2j+1) for 'gptj', (j, j+R/2) for 'neox'
 * With 'gptj' the rotated pair j stays at 2j and 2j+1 (interleaved), the order vLLM's and SGLang's MLA caches
 * hold (DeepSeek's rotary embedding with is_neox_style=False, then concat_and_cache_mla). transformers'
 * apply_rotary_pos_emb_interleave returns the same values de-interleaved: its element j is row[C + 2j] and its
 * element R/2 + j is row[C + 2j + 1] (so q·k, which both orders permute alike, is the same).
 * qRot[n, h] = q[n, h] with its last R values rotated the same way, the first Dq - R copied.
 */
export function mlaPoolFusedOracle(a: MlaInputs): { rows: Float64Array; qRot: Float64Array | undefined } {
  const { N, C, R, Hq, Dq } = a;
  const W = C + R;
  const rows = new Float64Array(N * W);
  const qRot = a.q ? Float64Array.from(a.q) : undefined;
  const angles = ropeAngles({ ropeBase: a.ropeBase, rotaryDim: R, ropeScaling: a.ropeScaling, angles: a.angles });
  const cos = new Float64Array(R / 2);
  const sin = new Float64Array(R / 2);
  for (let n = 0; n < N; n++) {
    const p = a.positions[n]!;
    for (let j = 0; j < R / 2; j++) {
      const f = angles.frequencies[j]!;
      // 'float32': the angle transformers, vLLM and SGLang compute, fround(fround(p) · f_j).
      const angle = a.angles === 'float32' ? Math.fround(Math.fround(p) * f) : p * f;
      cos[j] = angles.magnitude * Math.cos(angle);
      sin[j] = angles.magnitude * Math.sin(angle);
    }
    let sum = 0;
    for (let i = 0; i < C; i++) sum += a.kvLatent[n * W + i]! ** 2;
    const inv = 1 / Math.sqrt(sum / C + a.eps);
    for (let i = 0; i < C; i++) rows[n * W + i] = a.kvLatent[n * W + i]! * inv * a.kvNormWeight[i]!;
    for (let i = 0; i < R; i++) rows[n * W + C + i] = a.kvLatent[n * W + C + i]!;
    rotate(rows.subarray(n * W + C, (n + 1) * W), cos, sin, R, a.ropeStyle);
    if (qRot) for (let h = 0; h < Hq; h++) rotate(qRot.subarray((n * Hq + h) * Dq + Dq - R, (n * Hq + h + 1) * Dq), cos, sin, R, a.ropeStyle);
  }
  return { rows, qRot };
}

export interface MlaCase {
  readonly name: string;
  readonly N: number;
  readonly C: number;
  readonly R: number;
  /** Query heads and values per head; no q at all where Hq is 0. */
  readonly Hq: number;
  readonly Dq: number;
  readonly style: RopeStyle;
  readonly layout: 'NHD' | 'HND';
  readonly pageSize?: number;
  readonly S: number;
  readonly pool: 'model' | Fp8DType;
  readonly slotType: IndexDType;
  /** Slots of the N tokens: negatives skip, repeats are won by the last token. */
  readonly slots: readonly number[];
  readonly positions: readonly number[];
  readonly ropeBase?: number;
  readonly ropeScaling?: RopeScaling;
  readonly angles?: 'exact' | 'float32';
  /** kvLatent as a view of a wider projection (`before` columns of the query's latent in front), q's heads `padding` apart. */
  readonly views?: { readonly before: number; readonly padding: number };
  /** fp8 scale: small enough that some values saturate. */
  readonly scale?: number;
  readonly normF32?: boolean;
}

const deepseekYarn: RopeScaling = { type: 'yarn', factor: 40, originalMaxPositions: 4096, betaFast: 32, betaSlow: 1, mscale: 1, mscaleAllDim: 1 };

export const MLA_CASES: readonly MlaCase[] = [
  { name: 'gptj, NHD, duplicate and negative slots', N: 7, C: 32, R: 16, Hq: 4, Dq: 24, style: 'gptj', layout: 'NHD', S: 12, pool: 'model', slotType: 'i32', slots: [3, -1, 7, 3, 11, -5, 0], positions: [0, 1, 5, 17, 200, 3, 4095] },
  { name: 'neox, HND pages of 4, no q, i64 slots', N: 6, C: 16, R: 8, Hq: 0, Dq: 0, style: 'neox', layout: 'HND', pageSize: 4, S: 12, pool: 'model', slotType: 'i64', slots: [9, 2, -1, 9, 4, 11], positions: [7, 8, 9, 10, 11, 12] },
  { name: 'fp8e4m3 NHD pool, saturating scale', N: 5, C: 24, R: 8, Hq: 2, Dq: 40, style: 'gptj', layout: 'NHD', S: 8, pool: 'fp8e4m3', scale: 0.004, slotType: 'i32', slots: [1, 6, -2, 1, 7], positions: [3, 30, 300, 3000, 30000] },
  { name: 'fp8e5m2 HND pages of 2, neox, f32 norm weight', N: 5, C: 16, R: 16, Hq: 3, Dq: 16, style: 'neox', layout: 'HND', pageSize: 2, S: 10, pool: 'fp8e5m2', scale: 0.5, slotType: 'i64', slots: [8, 0, 5, -1, 0], positions: [1, 2, 3, 4, 5], normF32: true },
  {
    name: 'DeepSeek-V3: C=512, R=64, q heads 128 + 64, YaRN factor 40',
    N: 5,
    C: 512,
    R: 64,
    Hq: 8,
    Dq: 192,
    style: 'gptj',
    layout: 'HND',
    pageSize: 64,
    S: 128,
    pool: 'model',
    slotType: 'i32',
    slots: [127, 0, 64, 63, 127],
    positions: [0, 4095, 4096, 65535, 163839],
    ropeBase: 10000,
    ropeScaling: deepseekYarn,
  },
  { name: "DeepSeek-V3 into fp8e4m3, angles 'float32'", N: 4, C: 512, R: 64, Hq: 2, Dq: 576, style: 'gptj', layout: 'NHD', S: 6, pool: 'fp8e4m3', scale: 0.02, slotType: 'i64', slots: [5, 1, -1, 2], positions: [11, 1000, 77777, 12], ropeBase: 10000, ropeScaling: deepseekYarn, angles: 'float32' },
  { name: 'narrow rows (C=6, R=4, q heads of 5): element paths', N: 4, C: 6, R: 4, Hq: 3, Dq: 5, style: 'gptj', layout: 'NHD', S: 5, pool: 'model', slotType: 'i32', slots: [4, 0, 4, 2], positions: [2, 9, 40, 1] },
  { name: 'narrow rows into fp8e4m3 HND (C=10, R=2)', N: 3, C: 10, R: 2, Hq: 1, Dq: 2, style: 'neox', layout: 'HND', pageSize: 3, S: 6, pool: 'fp8e4m3', scale: 0.25, slotType: 'i32', slots: [5, 1, 3], positions: [6, 7, 8] },
  { name: 'kvLatent a view of the fused q/kv projection, q with padded heads', N: 6, C: 32, R: 16, Hq: 3, Dq: 48, style: 'gptj', layout: 'NHD', S: 8, pool: 'model', slotType: 'i32', slots: [0, 1, 2, 3, 4, 5], positions: [9, 8, 7, 6, 5, 4], views: { before: 8, padding: 8 } },
  { name: 'views off the vector grain (3 columns before, heads 1 apart more)', N: 5, C: 16, R: 8, Hq: 2, Dq: 24, style: 'neox', layout: 'HND', pageSize: 2, S: 6, pool: 'fp8e4m3', scale: 0.5, slotType: 'i32', slots: [5, 4, 3, 2, 1], positions: [1, 3, 5, 7, 9], views: { before: 3, padding: 1 } },
  { name: 'odd latent (C=7, R=4): element reads and half-word stores', N: 4, C: 7, R: 4, Hq: 2, Dq: 7, style: 'gptj', layout: 'NHD', S: 6, pool: 'model', slotType: 'i64', slots: [0, 5, 0, 2], positions: [4, 3, 2, 1] },
  { name: 'odd latent (C=9, R=2) into fp8e5m2 HND', N: 4, C: 9, R: 2, Hq: 1, Dq: 3, style: 'neox', layout: 'HND', pageSize: 3, S: 6, pool: 'fp8e5m2', scale: 0.125, slotType: 'i32', slots: [1, 1, -3, 4], positions: [0, 10, 20, 30] },
  { name: 'no tokens', N: 0, C: 16, R: 8, Hq: 2, Dq: 16, style: 'gptj', layout: 'NHD', S: 4, pool: 'model', slotType: 'i32', slots: [], positions: [] },
];

const tolerance = (c: MlaCase, dtype: FloatDType) => ropeBaseTolerance(dtype, Math.max(0, ...c.positions));

/** The case on `backend` with kvLatent, q and the weight in `dtype`: pool and qRot against the f64 reference. */
export async function runMlaCase(backend: Backend, c: MlaCase, dtype: FloatDType): Promise<void> {
  const checks = new Checks(`mlaPoolFused ${c.name} [${dtype}]`);
  const s = new Scope(backend);
  try {
    const rng = new Rng(seedOf(`mla pool ${c.name}`));
    const { N, C, R, Hq, Dq, S } = c;
    const W = C + R;
    const latentValues = randomValues(rng, N * W, 0.05, 4);
    const qValues = randomValues(rng, N * Hq * Dq);
    const weightValues = randomPositive(rng, C);
    const poolType: PoolDType = c.pool === 'model' ? dtype : c.pool;
    const poolShape = c.layout === 'NHD' ? [S, 1, W] : [S / c.pageSize!, 1, c.pageSize!, W];
    const poolBefore = patternValues(S * W).map((x) => x / 1024);
    let kvLatent: Tensor;
    let q: Tensor | undefined;
    if (c.views) {
      const row = c.views.before + W;
      const fused = new Float32Array(N * row);
      for (let n = 0; n < N; n++) fused.set(latentValues.subarray(n * W, (n + 1) * W), n * row + c.views.before);
      kvLatent = backend.view(s.float(dtype, [N, row], fused), [N, W], { strides: [row, 1], offset: c.views.before });
      const padded = Dq + c.views.padding;
      const qBase = new Float32Array(N * Hq * padded);
      for (let r = 0; r < N * Hq; r++) qBase.set(qValues.subarray(r * Dq, (r + 1) * Dq), r * padded);
      q = backend.view(s.float(dtype, [N * Hq * padded], qBase), [N, Hq, Dq], { strides: [Hq * padded, padded, 1] });
    } else {
      kvLatent = s.float(dtype, [N, W], latentValues);
      q = Hq > 0 ? s.float(dtype, [N, Hq, Dq], qValues) : undefined;
    }
    const kvNormWeight = s.float(c.normF32 ? 'f32' : dtype, [C], weightValues);
    const pool = s.float(poolType, poolShape, poolBefore);
    const scale = isFp8(poolType) ? s.float('f32', [1], [c.scale ?? 1]) : undefined;
    const eps = 1e-6;
    const result = (backend.mlaPoolFused as (a: unknown) => { qRot?: Tensor })({
      kvLatent,
      kvNormWeight,
      eps,
      ...(q ? { q } : {}),
      positions: s.index('i32', [N], c.positions),
      slots: s.index(c.slotType, [N], c.slots),
      pool,
      ...(scale ? { scale } : {}),
      kvLoraRank: C,
      qkRopeHeadDim: R,
      ...(q ? { numQoHeads: Hq } : {}),
      ropeStyle: c.style,
      ropeBase: c.ropeBase ?? 10000,
      ...(c.ropeScaling ? { ropeScaling: c.ropeScaling } : {}),
      ...(c.angles ? { angles: c.angles } : {}),
      layout: c.layout,
    });
    if (result.qRot) s.track(result.qRot);
    checks.that((result.qRot !== undefined) === (q !== undefined), `qRot is ${result.qRot ? 'returned' : 'missing'} where q is ${q ? 'given' : 'not given'}`);
    // The values the tensors hold, as the reference reads them.
    const [latent, weight, qHeld] = await Promise.all([readFloats(backend, kvLatent), readFloats(backend, kvNormWeight), q ? readFloats(backend, q) : Promise.resolve(undefined)]);
    const expected = mlaPoolFusedOracle({ N, C, R, Hq, Dq, ropeStyle: c.style, ropeBase: c.ropeBase ?? 10000, ropeScaling: c.ropeScaling, angles: c.angles, kvLatent: latent, kvNormWeight: weight, eps, q: qHeld, positions: [...c.positions] });

    // Each slot holds the row of the last token naming it; every other slot is as it was.
    const owner = new Map<number, number>();
    c.slots.forEach((slot, n) => {
      if (slot >= 0) owner.set(slot, n);
    });
    const stored = isFp8(poolType) ? Float32Array.from(await backend.readBits(pool as Tensor<'fp8e4m3'>)) : await readFloats(backend, pool);
    const initial = isFp8(poolType) ? Float32Array.from(poolBefore, (x) => encodeFp8(poolType as Fp8DType, x)) : await readFloats(backend, s.float(poolType, poolShape, poolBefore));
    const untouched = [...Array(S).keys()].filter((slot) => !owner.has(slot));
    const rowsOf = (values: ArrayLike<number>, slots: readonly number[]) => Float32Array.from(slots.flatMap((slot) => Array.from({ length: W }, (_, i) => values[slot * W + i]!)));
    checks.exact('pool rows no token writes', rowsOf(stored, untouched), rowsOf(initial, untouched));
    const written = [...owner.keys()].sort((x, y) => x - y);
    const want = Float64Array.from(written.flatMap((slot) => Array.from(expected.rows.subarray(owner.get(slot)! * W, (owner.get(slot)! + 1) * W))));
    if (isFp8(poolType)) {
      // fp8: the code of x / scale for an x within the tolerance of the exact row value (the model dtype rounds it first).
      const fp8 = poolType as Fp8DType;
      const sc = c.scale ?? 1;
      const slack = tolerance(c, dtype);
      const got = rowsOf(stored, written);
      const fp8Value = (x: number) => decodeFp8(fp8, encodeFp8(fp8, Math.fround(x)));
      let bad = -1;
      for (let i = 0; i < got.length && bad < 0; i++) {
        const x = want[i]! / sc;
        const [a, b] = [fp8Value(x * (1 - slack)), fp8Value(x * (1 + slack))];
        const value = decodeFp8(fp8, got[i]!);
        if (!(value >= Math.min(a, b) && value <= Math.max(a, b))) bad = i;
      }
      checks.that(bad < 0, `fp8 pool: element ${bad} of the written rows is code 0x${got[bad]?.toString(16)} (${decodeFp8(poolType as Fp8DType, got[bad] ?? 0)}), expected the code of ${want[bad]! / sc}`);
    } else {
      checks.close('pool rows (the last token of each slot)', rowsOf(stored, written), want, tolerance(c, dtype), { shape: [written.length, W], axes: ['slot', 'i'] });
    }
    if (result.qRot && expected.qRot && qHeld) {
      const got = await readFloats(backend, result.qRot);
      checks.close('qRot', got, expected.qRot, tolerance(c, dtype), { shape: [N, Hq, Dq], axes: ['n', 'h', 'd'] });
      // The part before the last R values of each head is copied bit for bit.
      const nope = (x: ArrayLike<number>) => Float32Array.from({ length: N * Hq * (Dq - R) }, (_, i) => x[Math.floor(i / (Dq - R)) * Dq + (i % (Dq - R))]!);
      checks.exact('qRot before the RoPE part (copied)', nope(got), nope(qHeld));
    }
  } finally {
    s.dispose();
  }
  checks.done();
}

export function describeMlaPoolFused(backendOf: () => Backend, dtypes: readonly FloatDType[], timeout: number): void {
  describe('mlaPoolFused, against the f64 reference', () => {
    for (const c of MLA_CASES) {
      for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runMlaCase(backendOf(), c, dtype), timeout);
    }
  });
}
