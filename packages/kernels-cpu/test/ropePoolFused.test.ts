import type { Backend, FloatDType, IndexDType } from '@kvkit/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { createCpuBackend } from '../src/index.js';
import { bitsOf, expectMatches, expectSameValues, randn, randomInts, rng, ropeElement, thrown } from './helpers.js';

const backend = createCpuBackend();

interface PoolCase {
  N: number;
  Hq: number;
  H: number;
  D: number;
  R: number;
  S: number;
  dtype: FloatDType;
  style: 'neox' | 'gptj';
  base: number;
  indexDtype?: IndexDType;
  maxPosition?: number;
  seed: number;
}

function poolCase(b: Backend, c: PoolCase) {
  const next = rng(c.seed);
  const { N, Hq, H, D, S } = c;
  const positions = randomInts(next, N, c.maxPosition ?? 8192);
  // distinct slots, about a quarter of the tokens skipped
  const free = Array.from({ length: S }, (_, i) => i).sort(() => next() - 0.5);
  const slots = Array.from({ length: N }, (_, n) => (next() < 0.25 ? -1 - Math.floor(next() * 3) : free[n % S]!));
  const idx = c.indexDtype ?? 'i32';
  return {
    args: {
      q: b.tensor(c.dtype, [N, Hq, D] as number[], randn(next, N * Hq * D)),
      k: b.tensor(c.dtype, [N, H, D] as number[], randn(next, N * H * D)),
      v: b.tensor(c.dtype, [N, H, D] as number[], randn(next, N * H * D)),
      positions: b.tensor(idx, [N] as number[], positions),
      slots: b.tensor(idx, [N] as number[], slots),
      kPool: b.tensor(c.dtype, [S, H, D] as number[], randn(next, S * H * D)),
      vPool: b.tensor(c.dtype, [S, H, D] as number[], randn(next, S * H * D)),
      headDim: D,
      numQoHeads: Hq,
      numKvHeads: H,
      ropeBase: c.base,
      rotaryDim: c.R,
      ropeStyle: c.style,
    },
    positions,
    slots,
  };
}

/** RoPE of [N, heads, D] values with θ_j = p · base^(−2j/R), as complex products, in f64. */
function referenceRope(x: ArrayLike<number>, heads: number, c: PoolCase, positions: readonly number[]): number[] {
  const out: number[] = [];
  const { D, R } = c;
  for (let n = 0; n < positions.length; n++) {
    const theta = (j: number) => positions[n]! / c.base ** ((2 * j) / R);
    for (let h = 0; h < heads; h++) {
      const head = Array.from({ length: D }, (_, i) => x[(n * heads + h) * D + i]!);
      for (let i = 0; i < D; i++) out.push(ropeElement(head, i, R, c.style, (j) => Math.cos(theta(j)), (j) => Math.sin(theta(j))));
    }
  }
  return out;
}

async function checkCase(c: PoolCase) {
  const { args, positions, slots } = poolCase(backend, c);
  const q = (await backend.read(args.q)) as Float32Array;
  const k = (await backend.read(args.k)) as Float32Array;
  const v = (await backend.read(args.v)) as Float32Array;
  const kPoolBefore = (await backend.read(args.kPool)) as Float32Array;
  const vPoolBefore = (await backend.read(args.vPool)) as Float32Array;
  const { qRot, kRot } = backend.ropePoolFused(args);
  expect(qRot.shape).toEqual([c.N, c.Hq, c.D]);
  expect(kRot.shape).toEqual([c.N, c.H, c.D]);
  const kRotValues = (await backend.read(kRot)) as Float32Array;
  expectMatches((await backend.read(qRot)) as Float32Array, referenceRope(q, c.Hq, c, positions), c.dtype, 'qRot');
  expectMatches(kRotValues, referenceRope(k, c.H, c, positions), c.dtype, 'kRot');
  const row = c.H * c.D;
  const kPoolWant = Array.from(kPoolBefore);
  const vPoolWant = Array.from(vPoolBefore);
  slots.forEach((slot, n) => {
    if (slot < 0) return;
    for (let i = 0; i < row; i++) {
      kPoolWant[slot * row + i] = kRotValues[n * row + i]!;
      vPoolWant[slot * row + i] = v[n * row + i]!;
    }
  });
  expectSameValues((await backend.read(args.kPool)) as Float32Array, kPoolWant, 'kPool');
  expectSameValues((await backend.read(args.vPool)) as Float32Array, vPoolWant, 'vPool');
}

describe('ropePoolFused against the complex-rotation reference', () => {
  let seed = 500;
  for (const D of [8, 16, 64, 80, 96, 128, 256]) {
    for (const dtype of ['f32', 'f16', 'bf16'] as const) {
      for (const style of ['neox', 'gptj'] as const) {
        it(`${dtype} ${style} D=${D}, full and partial rotary`, async () => {
          for (const R of [...new Set([D, 2 * Math.floor(D / 4)])]) {
            seed += 1;
            await checkCase({ N: 5, Hq: 4, H: 2, D, R, S: 9, dtype, style, base: 10000, seed });
          }
        });
      }
    }
  }

  for (const [Hq, H, indexDtype, base] of [
    [1, 1, 'i64', 10000],
    [8, 1, 'i32', 500000],
    [8, 2, 'i64', 1e6],
    [6, 3, 'i32', 10000],
  ] as const) {
    it(`GQA Hq=${Hq} H=${H}, ${indexDtype} indices, ropeBase ${base}`, async () => {
      await checkCase({ N: 7, Hq, H, D: 64, R: 64, S: 16, dtype: 'f32', style: 'neox', base, indexDtype, seed: Hq * 10 + H });
      await checkCase({ N: 7, Hq, H, D: 128, R: 32, S: 16, dtype: 'bf16', style: 'gptj', base, indexDtype, seed: Hq * 10 + H + 1 });
    });
  }
});

describe('ropePoolFused properties', () => {
  const dims = fc.record({
    N: fc.integer({ min: 1, max: 6 }),
    group: fc.integer({ min: 1, max: 4 }),
    H: fc.integer({ min: 1, max: 3 }),
    halfD: fc.integer({ min: 1, max: 20 }),
    halfR: fc.integer({ min: 1, max: 20 }),
    seed: fc.integer(),
  });
  const toCase = (d: { N: number; group: number; H: number; halfD: number; halfR: number; seed: number }, dtype: FloatDType, style: 'neox' | 'gptj', maxPosition: number): PoolCase => ({
    N: d.N,
    Hq: d.group * d.H,
    H: d.H,
    D: 2 * d.halfD,
    R: 2 * Math.min(d.halfR, d.halfD),
    S: d.N + 2,
    dtype,
    style,
    base: 10000,
    maxPosition,
    seed: d.seed,
  });

  it('position 0 is the identity: qRot and kRot are q and k bit for bit', async () => {
    await forEverySeed(80, (run) => fc.assert(
      fc.asyncProperty(dims, fc.constantFrom('f32', 'f16', 'bf16' as const), fc.constantFrom('neox', 'gptj' as const), async (d, dtype, style) => {
        const { args } = poolCase(backend, toCase(d, dtype, style, 1));
        const { qRot, kRot } = backend.ropePoolFused(args);
        expect(bitsOf((await backend.read(qRot)) as Float32Array)).toEqual(bitsOf((await backend.read(args.q)) as Float32Array));
        expect(bitsOf((await backend.read(kRot)) as Float32Array)).toEqual(bitsOf((await backend.read(args.k)) as Float32Array));
      }),
      run,
    ));
  });

  it('rotation keeps the norm of every pair and leaves the tail alone', async () => {
    await forEverySeed(80, (run) => fc.assert(
      fc.asyncProperty(dims, fc.constantFrom('neox', 'gptj' as const), async (d, style) => {
        const c = toCase(d, 'f32', style, 100000);
        const { args } = poolCase(backend, c);
        const q = (await backend.read(args.q)) as Float32Array;
        const qRot = (await backend.read(backend.ropePoolFused(args).qRot)) as Float32Array;
        for (let head = 0; head < q.length / c.D; head++) {
          const o = head * c.D;
          for (let j = 0; j < c.R / 2; j++) {
            const [a, b] = style === 'neox' ? [j, j + c.R / 2] : [2 * j, 2 * j + 1];
            const before = Math.hypot(q[o + a]!, q[o + b]!);
            expect(Math.abs(Math.hypot(qRot[o + a]!, qRot[o + b]!) - before)).toBeLessThanOrEqual(1e-6 * (1 + before));
          }
          for (let i = c.R; i < c.D; i++) expect(qRot[o + i]).toBe(q[o + i]);
        }
      }),
      run,
    ));
  });
});

describe('ropePoolFused pools', () => {
  it("two tokens naming one slot leave the last token's row (the contract's duplicates: 'last')", async () => {
    const { args } = poolCase(backend, { N: 2, Hq: 2, H: 2, D: 8, R: 8, S: 3, dtype: 'f16', style: 'neox', base: 10000, seed: 9 });
    const slots = backend.tensor('i32', [2], [1, 1]);
    const { kRot } = backend.ropePoolFused({ ...args, slots });
    const kRotValues = Array.from((await backend.read(kRot)) as Float32Array);
    const row = Array.from((await backend.read(args.kPool)) as Float32Array).slice(16, 32);
    expect(row).toEqual(kRotValues.slice(16, 32));
    expect(row).not.toEqual(kRotValues.slice(0, 16));
  });

  it('v as the V pool itself is refused with KV039, and nothing is written', async () => {
    const N = 4;
    const v = backend.tensor('bf16', [N, 2, 8], randn(rng(4), N * 2 * 8));
    const before = await backend.read(v);
    const { args } = poolCase(backend, { N, Hq: 2, H: 2, D: 8, R: 8, S: N, dtype: 'bf16', style: 'neox', base: 10000, seed: 4 });
    const err = thrown(() => backend.ropePoolFused({ ...args, v, vPool: v, slots: backend.tensor('i32', [N], [3, 0, 1, 2]) }));
    expect(err.code).toBe('KV039');
    expect(await backend.read(v)).toEqual(before);
  });

  it('a slot >= S throws KV038 synchronously; nothing is written and nothing returned', async () => {
    const { args } = poolCase(backend, { N: 3, Hq: 2, H: 1, D: 8, R: 8, S: 4, dtype: 'f32', style: 'gptj', base: 10000, seed: 2 });
    const kBefore = await backend.read(args.kPool);
    const vBefore = await backend.read(args.vPool);
    const err = thrown(() => backend.ropePoolFused({ ...args, slots: backend.tensor('i64', [3], [0n, -1n, 4n]) }));
    expect(err.code).toBe('KV038');
    expect(err.message).toContain('slots[2]');
    expect(await backend.read(args.kPool)).toEqual(kBefore);
    expect(await backend.read(args.vPool)).toEqual(vBefore);
  });
});
