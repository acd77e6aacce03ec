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
import type { Backend, FloatDType, RopeAngleMode } from '@kvkit/contracts';
import { exactTurns, float32Angle, ropeAngles } from '@kvkit/contracts/backend';
import type { RopeScaling } from '@kvkit/contracts/backend';
import { expect, it } from 'vitest';
import type { RopeStyle } from './cases.js';
import { roundToDType, Rng, seedOf } from './data.js';
import { ropePair } from './oracle.js';

/** One config per scaling type, at sizes real checkpoints use for their bases. */
export const ROPE_VARIANTS: readonly { readonly name: string; readonly ropeBase: number; readonly ropeScaling?: RopeScaling }[] = [
  { name: 'plain', ropeBase: 10000 },
  { name: 'linear', ropeBase: 10000, ropeScaling: { type: 'linear', factor: 4 } },
  { name: 'dynamic', ropeBase: 10000, ropeScaling: { type: 'dynamic', factor: 2, originalMaxPositions: 4096, sequenceLength: 6000 } },
  { name: 'llama3', ropeBase: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } },
  { name: 'yarn', ropeBase: 1e6, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } },
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
 * element within 1 ulp of f32 cos and sin (1.5 where YaRN's magnitude adds a
 * product) plus f32 arithmetic, plus the rounding of the output dtype; the
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
          for (const [at, want] of [[a, xa * c - xb * s], [b, xb * c + xa * s]] as const) {
            const f32Bound = cosSinUlps * (Math.abs(xa) * ulpF32(c) + Math.abs(xb) * ulpF32(s)) + 2 ** -23 * (Math.abs(xa * c) + Math.abs(xb * s));
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
}
