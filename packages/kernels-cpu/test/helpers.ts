import type { FloatDType } from '@kvkit/contracts';
import { expect } from 'vitest';

/** A small seeded generator (mulberry32), so every random case can be replayed. */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** n normal samples times `scale` (Box–Muller). */
export function randn(next: () => number, n: number, scale = 1): number[] {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const u = 1 - next();
    const v = next();
    out.push(scale * Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v));
  }
  return out;
}

export function uniform(next: () => number, n: number, lo: number, hi: number): number[] {
  return Array.from({ length: n }, () => lo + (hi - lo) * next());
}

export function randomInts(next: () => number, n: number, below: number): number[] {
  return Array.from({ length: n }, () => Math.floor(next() * below));
}

/** cos/sin cache rows as SEMANTICS §1 defines them, from a RoPE base, computed in f64. */
export function cosSinRows(P: number, R: number, base: number): number[] {
  const rows: number[] = [];
  for (let p = 0; p < P; p++) {
    const angles = Array.from({ length: R / 2 }, (_, j) => p * Math.exp((-2 * j * Math.log(base)) / R));
    rows.push(...angles.map(Math.cos), ...angles.map(Math.sin));
  }
  return rows;
}

interface Complex {
  re: number;
  im: number;
}
const times = (a: Complex, b: Complex): Complex => ({ re: a.re * b.re - a.im * b.im, im: a.re * b.im + a.im * b.re });

/**
 * One head's rotated element i, written as a complex product: the pair holding
 * i is z = x[re] + i·x[im], turned by e^{iθ} = cos + i·sin.
 */
export function ropeElement(x: readonly number[], i: number, R: number, style: 'neox' | 'gptj', cosOf: (j: number) => number, sinOf: (j: number) => number): number {
  if (i >= R) return x[i]!;
  const j = style === 'neox' ? i % (R / 2) : Math.floor(i / 2);
  const re = style === 'neox' ? j : 2 * j;
  const im = style === 'neox' ? j + R / 2 : 2 * j + 1;
  const z = times({ re: x[re]!, im: x[im]! }, { re: cosOf(j), im: sinOf(j) });
  return i === re ? z.re : z.im;
}

export interface NormRopeInputs {
  T: number;
  L: number;
  H: number;
  D: number;
  R: number;
  style: 'neox' | 'gptj';
  /** [T, L, 2*H*D], the values the backend holds */
  kv: ArrayLike<number>;
  /** [L, D] */
  weight: ArrayLike<number>;
  /** [L] */
  eps: ArrayLike<number>;
  positions: readonly number[];
  /** cos and sin of pair j at position p */
  cosAt: (p: number, j: number) => number;
  sinAt: (p: number, j: number) => number;
}

/** SEMANTICS §1 element by element, in f64, unrounded: K as [L, T, H, D], V as [L, T, H, D]. */
export function referenceNormRope(c: NormRopeInputs): { k: number[]; v: number[] } {
  const { T, L, H, D, R } = c;
  const k = new Array<number>(L * T * H * D);
  const v = new Array<number>(L * T * H * D);
  const at = (t: number, l: number, i: number) => c.kv[(t * L + l) * 2 * H * D + i]!;
  for (let l = 0; l < L; l++) {
    for (let t = 0; t < T; t++) {
      const p = c.positions[t]!;
      for (let h = 0; h < H; h++) {
        const head = Array.from({ length: D }, (_, i) => at(t, l, h * D + i));
        const meanSquare = head.reduce((s, x) => s + x * x, 0) / D;
        const scale = 1 / Math.sqrt(meanSquare + c.eps[l]!);
        const normed = head.map((x, i) => x * scale * c.weight[l * D + i]!);
        for (let i = 0; i < D; i++) {
          const o = ((l * T + t) * H + h) * D + i;
          k[o] = ropeElement(normed, i, R, c.style, (j) => c.cosAt(p, j), (j) => c.sinAt(p, j));
          v[o] = at(t, l, H * D + h * D + i);
        }
      }
    }
  }
  return { k, v };
}

const FORMAT = { f32: [23, -126], f16: [10, -14], bf16: [7, -126] } as const;

/** Spacing of the dtype's values around x. */
export function ulp(x: number, dtype: FloatDType): number {
  const [fraction, minExponent] = FORMAT[dtype];
  const e = x === 0 ? minExponent : Math.max(Math.floor(Math.log2(Math.abs(x))), minExponent);
  return 2 ** (e - fraction);
}

export const TOLERANCE: Record<FloatDType, number> = { f32: 1e-5, f16: 2e-3, bf16: 1e-2 };

/**
 * The SEMANTICS precision rule (‖out − ref‖ / ‖ref‖ within the dtype's
 * tolerance, no NaN), and the reference's own stronger promise: every element
 * within one unit in the last place of the unrounded f64 value.
 */
export function expectMatches(actual: ArrayLike<number>, reference: ArrayLike<number>, dtype: FloatDType, what: string): void {
  expect(actual.length, `${what}: length`).toBe(reference.length);
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < reference.length; i++) {
    const a = actual[i]!;
    const r = reference[i]!;
    if (!(Math.abs(a - r) <= ulp(r, dtype) + 1e-12 * (1 + Math.abs(r)))) {
      expect.fail(`${what}[${i}] = ${a}, reference ${r}: more than one ${dtype} ulp apart (or NaN)`);
    }
    diff += (a - r) ** 2;
    norm += r * r;
  }
  if (norm > 0) expect(Math.sqrt(diff / norm), `${what}: relative error`).toBeLessThanOrEqual(TOLERANCE[dtype]);
}

/** Runs fn and returns the error it throws synchronously (failing the test if it returns). */
export function thrown(fn: () => unknown): { code?: string; message: string } {
  try {
    fn();
  } catch (e) {
    return e as { code?: string; message: string };
  }
  return expect.fail('expected a throw');
}

/** The bits of float data, for bit-exact comparisons. */
export function bitsOf(a: Float32Array): Uint32Array {
  return new Uint32Array(a.buffer.slice(a.byteOffset, a.byteOffset + a.byteLength));
}

import type { Backend, IndexDType, Tensor } from '@kvkit/contracts';

export interface NormRopeCaseOptions {
  T: number;
  L: number;
  H: number;
  D: number;
  R: number;
  style: 'neox' | 'gptj';
  dtype: FloatDType;
  weightDtype?: FloatDType;
  cacheDtype?: FloatDType;
  positionsDtype?: IndexDType;
  P?: number;
  seed: number;
}

/** Random fusedNormRopeStacked inputs on a backend, never zeros. */
export function normRopeCase(backend: Backend, o: NormRopeCaseOptions) {
  const next = rng(o.seed);
  const P = o.P ?? 64;
  const { T, L, H, D, R } = o;
  const positions = randomInts(next, T, P);
  return {
    args: {
      kv: backend.tensor(o.dtype, [T, L, 2 * H * D] as number[], randn(next, T * L * 2 * H * D)),
      kNormWeight: backend.tensor(o.weightDtype ?? o.dtype, [L, D] as number[], uniform(next, L * D, 0.5, 1.5)),
      eps: backend.tensor('f32', [L] as number[], uniform(next, L, 1e-6, 1e-5)),
      cosSinCache: backend.tensor(o.cacheDtype ?? 'f32', [P, R] as number[], cosSinRows(P, R, 10000)),
      positions: backend.tensor(o.positionsDtype ?? 'i32', [T] as number[], positions),
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
      ropeStyle: o.style,
    },
    positions,
  };
}

/** The reference outputs of a fusedNormRopeStacked call, from the values its tensors hold. */
export async function referenceFor(
  backend: Backend,
  o: { T: number; L: number; H: number; D: number; R: number; style: 'neox' | 'gptj' },
  args: { kv: Tensor; kNormWeight: Tensor; eps: Tensor; cosSinCache: Tensor },
  positions: readonly number[],
) {
  const cache = (await backend.read(args.cosSinCache)) as Float32Array;
  const { R } = o;
  return referenceNormRope({
    ...o,
    kv: (await backend.read(args.kv)) as Float32Array,
    weight: (await backend.read(args.kNormWeight)) as Float32Array,
    eps: (await backend.read(args.eps)) as Float32Array,
    positions,
    cosAt: (p, j) => cache[p * R + j]!,
    sinAt: (p, j) => cache[p * R + R / 2 + j]!,
  });
}

/** Every element equal, -0 and NaN told apart: what a bit-exact copy must give after decoding. */
export function expectSameValues(actual: ArrayLike<number>, expected: ArrayLike<number>, what: string): void {
  expect(actual.length, `${what}: length`).toBe(expected.length);
  for (let i = 0; i < expected.length; i++) {
    if (!Object.is(actual[i], expected[i])) expect.fail(`${what}[${i}] = ${actual[i]}, expected ${expected[i]}`);
  }
}
