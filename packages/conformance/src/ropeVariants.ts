/**
 * Scaled RoPE and exact angles on one backend, against the f64 reference:
 * every scaling type and both angle conventions, neox and gptj, R/2 odd with
 * a partial rotary, positions up to 2^31 - 1. The reference angle is p·f_j
 * reduced exactly in integers (backend/rope.ts exactTurns), or the f32 angle
 * of 'float32' mode; cos and sin of it in f64. A backend passes when each
 * output is what cos and sin within an ulp of f32 give, after the output's
 * own rounding: an f32 angle at such positions misses by whole radians.
 */
import { ropeCosSinCache } from '@kvkit/contracts';
import type { Backend, FloatDType, RopeAngleMode, Tensor } from '@kvkit/contracts';
import { exactTurns, float32Angle, ropeAngles } from '@kvkit/contracts/backend';
import type { RopeScaling } from '@kvkit/contracts/backend';
import { it } from 'vitest';
import type { RopeStyle } from './cases.js';
import { roundToDType, Rng, seedOf } from './data.js';
import { longropeOracle, mropeStreamOf, ropePair } from './oracle.js';
import { readFloats, untyped } from './tensors.js';

/** Plain assertions: these cases also run bundled under node:test on the GPU host, where Vitest's expect is absent. */
function expect(actual: unknown, what = '') {
  const fail = (message: string): never => {
    throw new Error(`${what ? `${what}: ` : ''}${message}`);
  };
  return {
    toBe(want: unknown): void {
      if (!Object.is(actual, want)) fail(`expected ${String(want)}, got ${String(actual)}`);
    },
    toBeLessThanOrEqual(bound: number): void {
      if (!((actual as number) <= bound)) fail(`expected at most ${bound}, got ${String(actual)}`);
    },
    toEqual(want: readonly unknown[]): void {
      const got = actual as readonly unknown[];
      const at = got.length === want.length ? got.findIndex((x, i) => !Object.is(x, want[i])) : 0;
      if (at >= 0) fail(`first difference at ${at}: expected ${String(want[at])}, got ${String(got[at])} (lengths ${want.length}, ${got.length})`);
    },
  };
}

/** LongRoPE factors for R = 10 in the shape Phi-3's have (rising with the pair, the long ones far more), one a factor below 1. */
const LONGROPE_SHORT = [1, 1.0499999523162842, 1.25, 1.7999999523162842, 2.5];
const LONGROPE_LONG = [0.75, 1.600000023841858, 3.2300000190734863, 9.5, 27.5];

/** One config per scaling type, at sizes real checkpoints use for their bases. */
export const ROPE_VARIANTS: readonly { readonly name: string; readonly ropeBase: number; readonly ropeScaling?: RopeScaling }[] = [
  { name: 'plain', ropeBase: 10000 },
  { name: 'linear', ropeBase: 10000, ropeScaling: { type: 'linear', factor: 4 } },
  { name: 'dynamic', ropeBase: 10000, ropeScaling: { type: 'dynamic', factor: 2, originalMaxPositions: 4096, sequenceLength: 6000 } },
  { name: 'llama3', ropeBase: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } },
  { name: 'yarn', ropeBase: 1e6, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } },
  // DeepSeek's form (V2/V3 configs): the magnitude g(40, mscale) / g(40, mscaleAllDim), here 0.92 rather than 1.
  { name: 'yarn (DeepSeek mscale)', ropeBase: 10000, ropeScaling: { type: 'yarn', factor: 40, originalMaxPositions: 4096, mscale: 707 / 1000, mscaleAllDim: 1, betaFast: 32, betaSlow: 1 } },
  // Phi-3-mini-128k's form at R = 10: factor 131072 / 4096 picks the long factors and the magnitude sqrt(1 + ln 32 / ln 4096).
  { name: 'longrope', ropeBase: 10000, ropeScaling: { type: 'longrope', shortFactor: LONGROPE_SHORT, longFactor: LONGROPE_LONG, originalMaxPositions: 4096, factor: 32 } },
  // A sequence within the original context: the short factors, the magnitude still the factor's.
  { name: 'longrope (short)', ropeBase: 10000, ropeScaling: { type: 'longrope', shortFactor: LONGROPE_SHORT, longFactor: LONGROPE_LONG, originalMaxPositions: 4096, factor: 32, sequenceLength: 4096 } },
];

const [N, Hq, H, D, R] = [7, 3, 1, 14, 10];

/** Positions at both ends of the range and random ones between. */
function positionsOf(rng: Rng): number[] {
  return [0, 1, 2 ** 31 - 1, 2 ** 31 - 2, 1_234_567_891, 65_537 + rng.int(2 ** 20), rng.int(2 ** 31)];
}

const ulpF32 = (v: number) => {
  const a = Math.abs(Math.fround(v));
  return a === 0 ? 2 ** -149 : 2 ** Math.max(Math.floor(Math.log2(a)) - 23, -149);
};

/** The spacing of `dtype` around `v`: the rounding an output in that dtype may add. */
const ulpOf = (v: number, dtype: FloatDType) => {
  const a = Math.abs(v);
  if (a === 0 || dtype === 'f32') return ulpF32(v);
  return 2 ** (Math.floor(Math.log2(a)) - (dtype === 'f16' ? 10 : 7));
};

/** cos and sin of pair j at p, times the magnitude, in f64 from the exactly reduced angle. */
function referenceCosSin(p: number, j: number, angles: ReturnType<typeof ropeAngles>): [number, number] {
  const f = angles.frequencies[j]!;
  // Math.cos reduces an f64 argument exactly, so the f32 angle is taken as it is.
  const angle = angles.mode === 'float32' ? float32Angle(p, f) : 2 * Math.PI * exactTurns(p, f);
  return [angles.magnitude * Math.cos(angle), angles.magnitude * Math.sin(angle)];
}

/**
 * ropePoolFused of random q, k, v at positions up to 2^31 - 1: each rotated
 * element within 1 ulp of f32 cos and sin (1.5 where YaRN's or LongRoPE's
 * magnitude adds a product) plus f32 arithmetic, plus the rounding of the output dtype; the
 * pools hold kRot and v bit for bit.
 */
export async function checkRopeVariant(backend: Backend, variant: (typeof ROPE_VARIANTS)[number], angles: RopeAngleMode, style: RopeStyle, dtype: FloatDType): Promise<void> {
  const rng = new Rng(seedOf(`ropeVariant ${variant.name} ${angles} ${style} ${dtype}`));
  const signed = (n: number) => roundToDType(Array.from({ length: n }, () => 2 * rng.next() - 1), dtype);
  const [q, k, v] = [signed(N * Hq * D), signed(N * H * D), signed(N * H * D)];
  const positions = positionsOf(rng);
  const slots = rng.shuffle([...Array(N).keys()]);
  const spec = { ropeBase: variant.ropeBase, rotaryDim: R, ropeScaling: variant.ropeScaling, angles };
  const kPool = backend.tensor(dtype, [N, H, D], signed(N * H * D));
  const vPool = backend.tensor(dtype, [N, H, D], signed(N * H * D));
  const out = backend.ropePoolFused({
    q: backend.tensor(dtype, [N, Hq, D], q),
    k: backend.tensor(dtype, [N, H, D], k),
    v: backend.tensor(dtype, [N, H, D], v),
    positions: backend.tensor('i32', [N], positions),
    slots: backend.tensor('i32', [N], slots),
    kPool,
    vPool,
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    ropeStyle: style,
    ...spec,
  });
  const [qRot, kRot] = [await backend.read(out.qRot), await backend.read(out.kRot)];
  const reference = ropeAngles(spec);
  if (variant.ropeScaling?.type === 'longrope') checkLongropeAngles(variant.ropeBase, R, variant.ropeScaling, reference);
  const cosSinUlps = reference.magnitude === 1 ? 1 : 1.5;
  const worst = { excess: 0, where: '' };
  const check = (name: string, input: Float32Array, got: Float32Array, heads: number) => {
    for (let n = 0; n < N; n++) {
      for (let j = 0; j < R / 2; j++) {
        const [c, s] = referenceCosSin(positions[n]!, j, reference);
        const [a, b] = ropePair(j, R, style);
        for (let h = 0; h < heads; h++) {
          const row = (n * heads + h) * D;
          const [xa, xb] = [input[row + a]!, input[row + b]!];
          // Element a is xa·c - xb·s and b is xb·c + xa·s: each cos and sin error scales with the input it multiplies.
          for (const [at, want, xc, xs] of [[a, xa * c - xb * s, xa, xb], [b, xb * c + xa * s, xb, xa]] as const) {
            const f32Bound = cosSinUlps * (Math.abs(xc) * ulpF32(c) + Math.abs(xs) * ulpF32(s)) + 2 ** -23 * (Math.abs(xc * c) + Math.abs(xs * s));
            const excess = Math.abs(got[row + at]! - want) / (f32Bound + ulpOf(want, dtype));
            if (excess > worst.excess) Object.assign(worst, { excess, where: `${name}[n=${n}, h=${h}, d=${at}] at position ${positions[n]}: got ${got[row + at]}, want ${want}` });
          }
        }
      }
      // Past R the head is copied as it is.
      for (let h = 0; h < heads; h++) for (let d = R; d < D; d++) expect(got[(n * heads + h) * D + d]).toBe(input[(n * heads + h) * D + d]);
    }
  };
  check('qRot', q, qRot, Hq);
  check('kRot', k, kRot, H);
  expect(worst.excess, `worst element: ${worst.where}`).toBeLessThanOrEqual(1);
  const [kRows, vRows] = [await backend.read(kPool), await backend.read(vPool)];
  slots.forEach((slot, n) => {
    expect(Array.from(kRows.subarray(slot * H * D, (slot + 1) * H * D))).toEqual(Array.from(kRot.subarray(n * H * D, (n + 1) * H * D)));
    expect(Array.from(vRows.subarray(slot * H * D, (slot + 1) * H * D))).toEqual(Array.from(v.subarray(n * H * D, (n + 1) * H * D)));
  });
}

/** The frequencies and magnitude the backends take for LongRoPE are those of the f64 formula (oracle.ts), to the rounding of each mode. */
function checkLongropeAngles(ropeBase: number, rotaryDim: number, scaling: Extract<RopeScaling, { type: 'longrope' }>, angles: ReturnType<typeof ropeAngles>): void {
  const want = longropeOracle(ropeBase, rotaryDim, scaling);
  // 'float32' is transformers' f32 steps (a pow, a product and a reciprocal, each rounded); 'exact' is f64.
  const rel = angles.mode === 'float32' ? 2 ** -21 : 2 ** -50;
  for (const [j, f] of want.frequencies.entries()) expect(Math.abs(angles.frequencies[j]! - f), `longrope f[${j}]`).toBeLessThanOrEqual(rel * f);
  expect(Math.abs(angles.magnitude - want.magnitude), 'longrope magnitude').toBeLessThanOrEqual(rel * want.magnitude);
}

/**
 * ropeCosSinCache gives the angles ropePoolFused applies, rounded once, and a
 * materializer fed that cache writes the K a materializer given ropeBase and
 * ropeScaling writes.
 */
export async function checkCosSinCacheBuilder(backend: Backend, variant: (typeof ROPE_VARIANTS)[number], angles: RopeAngleMode): Promise<void> {
  const rng = new Rng(seedOf(`ropeCosSinCache ${variant.name} ${angles}`));
  const P = 37;
  const spec = { ropeBase: variant.ropeBase, rotaryDim: R, angles, ...(variant.ropeScaling ? { ropeScaling: variant.ropeScaling } : {}) };
  const cache = ropeCosSinCache(backend, { ...spec, positions: P });
  expect(cache.shape).toEqual([P, R]);
  const rows = await backend.read(cache);
  const reference = ropeAngles(spec);
  for (let p = 0; p < P; p++) {
    for (let j = 0; j < R / 2; j++) {
      const [c, s] = referenceCosSin(p, j, reference);
      expect(Math.abs(rows[p * R + j]! - c)).toBeLessThanOrEqual(0.5 * ulpF32(c) * (1 + 1e-6));
      expect(Math.abs(rows[p * R + R / 2 + j]! - s)).toBeLessThanOrEqual(0.5 * ulpF32(s) * (1 + 1e-6));
    }
  }
  const [T, L, hidden] = [5, 2, 12];
  const weights = {
    kvWeight: backend.tensor('f32', [L, 2 * H * D, hidden], Array.from({ length: L * 2 * H * D * hidden }, () => rng.next() - 0.5)),
    kNormWeight: backend.tensor('f32', [L, D], Array.from({ length: L * D }, () => 0.5 + rng.next())),
    eps: 1e-6,
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
  };
  const ctxHidden = backend.tensor('f32', [T, hidden], Array.from({ length: T * hidden }, () => rng.next() - 0.5));
  const positions = backend.tensor('i32', [T], rng.shuffle([...Array(P).keys()]).slice(0, T));
  const kOf = async (m: ReturnType<Backend['createKvMaterializer']>) => {
    const reads: Promise<Float32Array>[] = [];
    m.materialize({ ctxHidden, positions, writeLayerKv: (_, kl) => void reads.push(backend.read(kl) as Promise<Float32Array>) });
    const ks = await Promise.all(reads);
    m.dispose();
    return ks;
  };
  const fromScaling = await kOf(backend.createKvMaterializer({ ...weights, ...spec }));
  const fromCache = await kOf(backend.createKvMaterializer({ ...weights, cosSinCache: cache }));
  for (let l = 0; l < L; l++) {
    for (let i = 0; i < fromCache[l]!.length; i++) expect(Math.abs(fromScaling[l]![i]! - fromCache[l]![i]!)).toBeLessThanOrEqual(4e-6 * (1 + Math.abs(fromCache[l]![i]!)));
  }
}

/** A variant's scaling at another rotary dim: LongRoPE's lists stretched to R/2 factors (each list's own range, rising with the pair). */
function scalingFor(scaling: RopeScaling | undefined, R: number): RopeScaling | undefined {
  if (scaling?.type !== 'longrope') return scaling;
  const stretch = (list: readonly number[]) => Array.from({ length: R / 2 }, (_, j) => list[Math.floor((j * list.length) / (R / 2))]! * (1 + j / R));
  return { ...scaling, shortFactor: stretch(scaling.shortFactor), longFactor: stretch(scaling.longFactor) };
}

/** How the scaled mRoPE + Q/K-norm case lays q, k and v out in one fused qkv projection. */
interface ScaledMropeLayout {
  readonly what: string;
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly style: RopeStyle;
  readonly section: readonly [number, number, number];
  /** A section of the same R in Qwen3-VL's interleaved layout. */
  readonly interleavedSection: readonly [number, number, number];
  /** Spare elements after each token's q, k and v, and before the first token. */
  readonly pad: number;
  readonly offset: number;
  readonly positionType: 'i32' | 'i64';
}

const SCALED_MROPE_LAYOUTS: readonly ScaledMropeLayout[] = [
  // Rows on 16-byte boundaries: the fast paths read the views in place.
  { what: 'aligned rows', N: 5, Hq: 4, H: 2, D: 64, R: 64, style: 'neox', section: [8, 12, 12], interleavedSection: [12, 10, 10], pad: 16, offset: 16, positionType: 'i32' },
  // An odd head dim and a partial rotary off 16 bytes: the element paths.
  { what: 'odd head dim', N: 6, Hq: 3, H: 1, D: 14, R: 10, style: 'gptj', section: [1, 2, 2], interleavedSection: [2, 2, 1], pad: 3, offset: 5, positionType: 'i64' },
];

/**
 * ropePoolFused with YaRN (or LongRoPE) scaling, mRoPE (three distinct streams with
 * positions up to 2^31 - 1) and a Q/K-norm, on q, k and v as splitQkv views
 * of one padded, offset projection, against the f64 formulas: each head
 * RMS-normed over D, then pair j rotated by the angle of its stream's
 * position, reduced as referenceCosSin reduces it, and scaled by YaRN's
 * magnitude. The norm's f32 sum and inverse root may add a few ulps; an f32
 * angle at these positions, a stream mixed up or a magnitude left out miss
 * by far more. The pools hold kRot and v bit for bit at the slots.
 */
export async function checkScaledMropeQkNormOnViews(backend: Backend, angles: RopeAngleMode, dtype: FloatDType, variantName = 'yarn', interleaved = false): Promise<void> {
  const variant = ROPE_VARIANTS.find((v) => v.name === variantName)!;
  const made: { dispose(): void }[] = [];
  const keep = <T extends { dispose(): void }>(t: T) => {
    made.push(t);
    return t;
  };
  try {
    for (const c of SCALED_MROPE_LAYOUTS) {
      const { N, Hq, H, D, R } = c;
      const rng = new Rng(seedOf(`ropeVariant ${variantName}${interleaved ? ' interleaved' : ''} mRoPE Q/K-norm views ${c.what} ${angles} ${dtype}`));
      const section = interleaved ? c.interleavedSection : c.section;
      const S = N + 2;
      const width = (Hq + 2 * H) * D;
      const row = width + c.pad;
      const fusedValues = roundToDType(Array.from({ length: c.offset + N * row }, () => 2 * rng.next() - 1), dtype);
      const fused = keep(backend.tensor(dtype, [c.offset + N * row], fusedValues));
      const { q, k, v } = backend.splitQkv(backend.view(fused, [N, width], { strides: [row, 1], offset: c.offset }), { numQoHeads: Hq, numKvHeads: H, headDim: D });
      // Element (n, h, d) of the q, k or v part starting `first` elements into a token's row.
      const part = (heads: number, first: number) => Float64Array.from({ length: N * heads * D }, (_, i) => fusedValues[c.offset + Math.floor(i / (heads * D)) * row + first + (i % (heads * D))]!);
      const [qIn, kIn, vIn] = [part(Hq, 0), part(H, Hq * D), part(H, (Hq + H) * D)];
      const qWeight = roundToDType(Array.from({ length: D }, () => 0.5 + rng.next()), dtype);
      const kWeight = Float32Array.from({ length: D }, () => 0.5 + rng.next());
      // Temporal, height and width positions drawn apart, the range's ends among them.
      const positions = Array.from({ length: 3 * N }, (_, i) => (i % 4 === 0 ? 2 ** 31 - 1 - (i % 3) : rng.int(2 ** 31)));
      const slots = rng.shuffle([...Array(S).keys()]).slice(0, N);
      slots[N - 1] = -1;
      const poolValues = [0, 1].map(() => roundToDType(Array.from({ length: S * H * D }, () => 2 * rng.next() - 1), dtype));
      const [kPool, vPool] = poolValues.map((p) => keep(backend.tensor(dtype, [S, H, D], p) as Tensor)) as [Tensor, Tensor];
      const spec = { ropeBase: variant.ropeBase, rotaryDim: R, ropeScaling: scalingFor(variant.ropeScaling, R), angles };
      const out = untyped(backend).ropePoolFused({
        q,
        k,
        v,
        qNormWeight: keep(backend.tensor(dtype, [D], qWeight)),
        kNormWeight: keep(backend.tensor('f32', [D], kWeight)),
        eps: 1e-6,
        positions: keep(c.positionType === 'i64' ? backend.tensor('i64', [3, N], BigInt64Array.from(positions, BigInt)) : backend.tensor('i32', [3, N], Int32Array.from(positions))),
        mropeSection: section,
        ...(interleaved ? { mropeInterleaved: true } : {}),
        slots: keep(backend.tensor('i32', [N], Int32Array.from(slots))),
        kPool,
        vPool,
        numQoHeads: Hq,
        numKvHeads: H,
        headDim: D,
        ropeStyle: c.style,
        ...spec,
      });
      const [qRot, kRot] = [await readFloats(backend, keep(out.qRot)), await readFloats(backend, keep(out.kRot))];
      const reference = ropeAngles(spec);
      const cosSinUlps = reference.magnitude === 1 ? 1 : 1.5;
      const streamOf = (j: number) => mropeStreamOf(section, j, interleaved);
      const worst = { excess: 0, where: '' };
      const check = (name: string, input: Float64Array, weight: Float32Array, got: Float32Array, heads: number) => {
        for (let n = 0; n < N; n++) {
          for (let h = 0; h < heads; h++) {
            const at = (n * heads + h) * D;
            let sum = 0;
            for (let d = 0; d < D; d++) sum += input[at + d]! ** 2;
            const inv = 1 / Math.sqrt(sum / D + 1e-6);
            const x = Float64Array.from({ length: D }, (_, d) => input[at + d]! * inv * weight[d]!);
            const want = Float64Array.from(x);
            // The norm in f32 (a sum of D squares, an inverse root, two products) adds a few ulps of each element it feeds.
            const bound = Float64Array.from(x, (xd) => 2 ** -18 * Math.abs(xd));
            for (let j = 0; j < R / 2; j++) {
              const [cj, sj] = referenceCosSin(positions[streamOf(j) * N + n]!, j, reference);
              const [a, b] = ropePair(j, R, c.style);
              const [xa, xb] = [x[a]!, x[b]!];
              want[a] = xa * cj - xb * sj;
              want[b] = xb * cj + xa * sj;
              const rounding = (xc: number, xs: number) => cosSinUlps * (Math.abs(xc) * ulpF32(cj) + Math.abs(xs) * ulpF32(sj)) + 2 ** -23 * (Math.abs(xc * cj) + Math.abs(xs * sj)) + 2 ** -18 * (Math.abs(xa) + Math.abs(xb));
              bound[a] = rounding(xa, xb);
              bound[b] = rounding(xb, xa);
            }
            for (let d = 0; d < D; d++) {
              const excess = Math.abs(got[at + d]! - want[d]!) / (bound[d]! + ulpOf(want[d]!, dtype));
              if (excess > worst.excess) Object.assign(worst, { excess, where: `${c.what}: ${name}[n=${n}, h=${h}, d=${d}]: got ${got[at + d]}, want ${want[d]}` });
            }
          }
        }
      };
      check('qRot', qIn, qWeight, qRot, Hq);
      check('kRot', kIn, kWeight, kRot, H);
      expect(worst.excess, `worst element: ${worst.where}`).toBeLessThanOrEqual(1);
      const [kRows, vRows] = [await readFloats(backend, kPool), await readFloats(backend, vPool)];
      const rowSize = H * D;
      for (let slot = 0; slot < S; slot++) {
        const n = slots.indexOf(slot);
        const [wantK, wantV] = n < 0 ? [poolValues[0]!.subarray(slot * rowSize, (slot + 1) * rowSize), poolValues[1]!.subarray(slot * rowSize, (slot + 1) * rowSize)] : [kRot.subarray(n * rowSize, (n + 1) * rowSize), Float32Array.from(vIn.subarray(n * rowSize, (n + 1) * rowSize))];
        expect(Array.from(kRows.subarray(slot * rowSize, (slot + 1) * rowSize)), `${c.what}: kPool[${slot}]`).toEqual(Array.from(wantK));
        expect(Array.from(vRows.subarray(slot * rowSize, (slot + 1) * rowSize)), `${c.what}: vPool[${slot}]`).toEqual(Array.from(wantV));
      }
    }
  } finally {
    for (const t of made) t.dispose();
  }
}

/** Registers the checks; the suite calls this once per backend. */
export function defineRopeVariantChecks(backend: () => Backend, timeout: number): void {
  for (const variant of ROPE_VARIANTS) {
    for (const angles of ['exact', 'float32'] as const) {
      for (const style of ['neox', 'gptj'] as const) {
        it(`ropePoolFused ${variant.name}, angles ${angles}, ${style}, positions to 2^31 - 1 [f32]`, () => checkRopeVariant(backend(), variant, angles, style, 'f32'), timeout);
      }
      it(`ropeCosSinCache ${variant.name}, angles ${angles}: the same angles, and a materializer given it = one given ropeScaling`, () => checkCosSinCacheBuilder(backend(), variant, angles), timeout);
    }
    it(`ropePoolFused ${variant.name}, angles exact, neox [bf16]`, () => checkRopeVariant(backend(), variant, 'exact', 'neox', 'bf16'), timeout);
  }
  for (const angles of ['exact', 'float32'] as const) {
    it(`ropePoolFused yarn + mRoPE + Q/K-norm on splitQkv views, angles ${angles}, positions to 2^31 - 1 [f32]`, () => checkScaledMropeQkNormOnViews(backend(), angles, 'f32'), timeout);
  }
  it('ropePoolFused yarn + mRoPE + Q/K-norm on splitQkv views, angles exact [bf16]', () => checkScaledMropeQkNormOnViews(backend(), 'exact', 'bf16'), timeout);
  // Qwen3-VL's interleaved layout under LongRoPE's per-pair factors and magnitude: every piece of this family's angles at once.
  for (const angles of ['exact', 'float32'] as const) {
    it(`ropePoolFused longrope + interleaved mRoPE + Q/K-norm on splitQkv views, angles ${angles}, positions to 2^31 - 1 [f32]`, () => checkScaledMropeQkNormOnViews(backend(), angles, 'f32', 'longrope', true), timeout);
  }
  it('ropePoolFused longrope + interleaved mRoPE + Q/K-norm on splitQkv views, angles exact [bf16]', () => checkScaledMropeQkNormOnViews(backend(), 'exact', 'bf16', 'longrope', true), timeout);
}
