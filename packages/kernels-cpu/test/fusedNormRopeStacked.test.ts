import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { createCpuBackend } from '../src/index.js';
import { bitsOf, expectMatches, expectSameValues, normRopeCase, referenceFor, thrown } from './helpers.js';
import type { NormRopeCaseOptions } from './helpers.js';

const backend = createCpuBackend();

async function checkAgainstReference(o: NormRopeCaseOptions) {
  const { args, positions } = normRopeCase(backend, o);
  const { kOut, vOut } = backend.fusedNormRopeStacked(args);
  expect(kOut.shape).toEqual([o.L, o.T, o.H, o.D]);
  expect(vOut.dtype).toBe(o.dtype);
  const ref = await referenceFor(backend, o, args, positions);
  expectMatches((await backend.read(kOut)) as Float32Array, ref.k, o.dtype, 'kOut');
  expectSameValues((await backend.read(vOut)) as Float32Array, ref.v, 'vOut');
}

describe('fusedNormRopeStacked against the element-wise reference', () => {
  let seed = 1;
  for (const D of [8, 16, 64, 80, 96, 128, 256]) {
    const rotaryDims = [...new Set([D, 2 * Math.floor(D / 4), 2])];
    for (const dtype of ['f32', 'f16', 'bf16'] as const) {
      for (const style of ['neox', 'gptj'] as const) {
        it(`${dtype} ${style} D=${D} R=${rotaryDims.join('|')}`, async () => {
          for (const R of rotaryDims) {
            seed += 1;
            await checkAgainstReference({ T: 4, L: 2, H: 2, D, R, style, dtype, weightDtype: seed % 2 ? 'f32' : dtype, seed });
          }
        });
      }
    }
  }

  for (const [H, cacheDtype, positionsDtype] of [
    [1, 'f16', 'i64'],
    [4, 'bf16', 'i32'],
    [8, 'f32', 'i64'],
  ] as const) {
    it(`KV heads H=${H}, ${cacheDtype} cache, ${positionsDtype} positions`, async () => {
      for (const dtype of ['f32', 'bf16'] as const) {
        await checkAgainstReference({ T: 3, L: 3, H, D: 128, R: 64, style: 'neox', dtype, cacheDtype, positionsDtype, P: 4096, seed: 100 + H });
      }
    });
  }
});

describe('fusedNormRopeStacked outputs', () => {
  it('writes caller-supplied kOut and vOut in place and returns them', async () => {
    const o = { T: 3, L: 2, H: 2, D: 16, R: 16, style: 'neox', dtype: 'bf16', seed: 7 } as const;
    const { args, positions } = normRopeCase(backend, o);
    const kOut = backend.tensor('bf16', [2, 3, 2, 16], new Array(192).fill(5));
    const vOut = backend.tensor('bf16', [2, 3, 2, 16], new Array(192).fill(5));
    const out = backend.fusedNormRopeStacked({ ...args, kOut, vOut });
    expect(out.kOut).toBe(kOut);
    expect(out.vOut).toBe(vOut);
    const ref = await referenceFor(backend, o, args, positions);
    expectMatches((await backend.read(kOut)) as Float32Array, ref.k, 'bf16', 'kOut');
    expectSameValues((await backend.read(vOut)) as Float32Array, ref.v, 'vOut');
  });

  it('T = 0 gives empty [L, 0, H, D] outputs', async () => {
    const { args } = normRopeCase(backend, { T: 0, L: 3, H: 2, D: 8, R: 8, style: 'neox', dtype: 'f16', seed: 1 });
    const { kOut, vOut } = backend.fusedNormRopeStacked(args);
    expect(kOut.shape).toEqual([3, 0, 2, 8]);
    expect(vOut.shape).toEqual([3, 0, 2, 8]);
    expect((await backend.read(kOut)).length).toBe(0);
  });

  it('copies V bit for bit: NaN payloads, -0, subnormals, infinities', async () => {
    const T = 2;
    const L = 2;
    const H = 1;
    const D = 4;
    const words = new Uint32Array(T * L * 2 * H * D);
    const special = [0x7fa00001, 0xffc12345, 0x80000000, 0x00000001, 0x7f800000, 0xff800000, 0x3f800001, 0x807fffff];
    for (let t = 0; t < T; t++) {
      for (let l = 0; l < L; l++) {
        for (let i = 0; i < D; i++) {
          words[(t * L + l) * 2 * D + i] = 0x3f800000 + i; // K: ordinary values near 1
          words[(t * L + l) * 2 * D + D + i] = special[(t * L + l + i) % special.length]!;
        }
      }
    }
    const kv = backend.tensor('f32', [T, L, 2 * D], new Float32Array(words.buffer));
    const { vOut } = backend.fusedNormRopeStacked({
      kv,
      kNormWeight: backend.tensor('f32', [L, D], new Array(L * D).fill(1)),
      eps: backend.tensor('f32', [L], [1e-6, 1e-6]),
      cosSinCache: backend.tensor('f32', [2, 2], [1, 0, 0.5, Math.sqrt(3) / 2]),
      positions: backend.tensor('i32', [T], [1, 0]),
      numKvHeads: H,
      headDim: D,
      rotaryDim: 2,
    });
    const got = bitsOf((await backend.read(vOut)) as Float32Array);
    for (let l = 0; l < L; l++) {
      for (let t = 0; t < T; t++) {
        for (let i = 0; i < D; i++) expect(got[(l * T + t) * D + i]).toBe(words[(t * L + l) * 2 * D + D + i]);
      }
    }
  });
});

describe('fusedNormRopeStacked properties', () => {
  const shapes = fc.record({
    T: fc.integer({ min: 1, max: 4 }),
    L: fc.integer({ min: 1, max: 3 }),
    H: fc.integer({ min: 1, max: 3 }),
    halfD: fc.integer({ min: 1, max: 24 }),
    halfR: fc.integer({ min: 1, max: 24 }),
    seed: fc.integer(),
  });

  it('position 0 is the identity: neox and gptj give the same bits there, and the plain RMSNorm', async () => {
    await forEverySeed(60, (run) => fc.assert(
      fc.asyncProperty(shapes, fc.constantFrom('f32', 'f16', 'bf16' as const), async (s, dtype) => {
        const D = 2 * s.halfD;
        const R = 2 * Math.min(s.halfR, s.halfD);
        const o = { ...s, D, R, dtype, style: 'neox', P: 1 } as const;
        const { args } = normRopeCase(backend, o);
        const neox = await backend.read(backend.fusedNormRopeStacked(args).kOut);
        const gptj = await backend.read(backend.fusedNormRopeStacked({ ...args, ropeStyle: 'gptj' }).kOut);
        expect(bitsOf(neox as Float32Array)).toEqual(bitsOf(gptj as Float32Array));
        const ref = await referenceFor(backend, { ...o, R: 2 }, { ...args, cosSinCache: backend.tensor('f32', [1, 2], [1, 0]) }, new Array(s.T).fill(0));
        expectMatches(neox as Float32Array, ref.k, dtype, 'kOut at position 0');
      }),
      run,
    ));
  });

  it('rotation keeps the norm of every rotated pair', async () => {
    await forEverySeed(60, (run) => fc.assert(
      fc.asyncProperty(shapes, fc.constantFrom('neox', 'gptj' as const), async (s, style) => {
        const D = 2 * s.halfD;
        const R = 2 * Math.min(s.halfR, s.halfD);
        const o = { ...s, D, R, dtype: 'f32', style, P: 512 } as const;
        const { args } = normRopeCase(backend, o);
        const rotated = (await backend.read(backend.fusedNormRopeStacked(args).kOut)) as Float32Array;
        const atZero = backend.tensor('i32', [s.T], new Array(s.T).fill(0));
        const plain = (await backend.read(backend.fusedNormRopeStacked({ ...args, positions: atZero }).kOut)) as Float32Array;
        for (let head = 0; head < rotated.length / D; head++) {
          for (let j = 0; j < R / 2; j++) {
            const [a, b] = style === 'neox' ? [j, j + R / 2] : [2 * j, 2 * j + 1];
            const o1 = head * D;
            const before = Math.hypot(plain[o1 + a]!, plain[o1 + b]!);
            const after = Math.hypot(rotated[o1 + a]!, rotated[o1 + b]!);
            expect(Math.abs(after - before)).toBeLessThanOrEqual(1e-6 * (1 + before));
          }
          for (let i = R; i < D; i++) expect(rotated[head * D + i]).toBe(plain[head * D + i]);
        }
      }),
      run,
    ));
  });
});

describe('fusedNormRopeStacked bad values', () => {
  it('a position >= P throws KV017 synchronously and writes nothing', async () => {
    const { args } = normRopeCase(backend, { T: 3, L: 2, H: 2, D: 8, R: 8, style: 'neox', dtype: 'f32', P: 16, seed: 3 });
    const kOut = backend.tensor('f32', [2, 3, 2, 8], new Array(96).fill(7));
    const vOut = backend.tensor('f32', [2, 3, 2, 8], new Array(96).fill(9));
    for (const bad of [[0, 16, 1], [0, 1, -1]]) {
      const err = thrown(() => backend.fusedNormRopeStacked({ ...args, kOut, vOut, positions: backend.tensor('i64', [3], bad) }));
      expect(err.code).toBe('KV017');
      expect(err.message).toContain('positions[');
    }
    expect(Array.from(await backend.read(kOut))).toEqual(new Array(96).fill(7));
    expect(Array.from(await backend.read(vOut))).toEqual(new Array(96).fill(9));
  });
});
