import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ropeAngles, ropeFrequencies, writeCosSinRow, writeCosSinRows } from '../src/backend/index.js';

const base = fc.double({ min: 1.5, max: 1e7, noNaN: true });
const rotary = fc.integer({ min: 1, max: 96 }).map((h) => 2 * h);

describe('ropeFrequencies', () => {
  it('is base^(-2j/R) for j < R/2, as exp(-2j/R · ln base) computes it', () => {
    fc.assert(
      fc.property(base, rotary, (ropeBase, rotaryDim) => {
        const f = ropeFrequencies({ ropeBase, rotaryDim });
        expect(f).toHaveLength(rotaryDim / 2);
        for (const [j, fj] of f.entries()) expect(Math.abs(fj - Math.exp((-2 * j * Math.log(ropeBase)) / rotaryDim))).toBeLessThanOrEqual(1e-14 * fj);
        for (let j = 1; j < f.length; j++) expect(f[j]!).toBeLessThan(f[j - 1]!);
      }),
    );
  });

  it('ropeAngles gives the same frequencies and magnitude 1', () => {
    const spec = { ropeBase: 500000, rotaryDim: 6 };
    expect(ropeAngles(spec)).toEqual({ frequencies: ropeFrequencies(spec), magnitude: 1 });
  });
});

describe('cos/sin rows', () => {
  it('row p is cos(p·f) ‖ sin(p·f): unit pairs, and rows add like angles', () => {
    fc.assert(
      fc.property(base, rotary, fc.integer({ min: 0, max: 5000 }), fc.integer({ min: 0, max: 5000 }), (ropeBase, rotaryDim, p, q) => {
        const angles = ropeAngles({ ropeBase, rotaryDim });
        const half = rotaryDim / 2;
        const row = (pos: number) => {
          const out = new Float64Array(rotaryDim);
          writeCosSinRow(out, 0, pos, angles);
          return out;
        };
        const [a, b, ab] = [row(p), row(q), row(p + q)];
        for (let j = 0; j < half; j++) {
          expect(a[j]! ** 2 + a[half + j]! ** 2).toBeCloseTo(1, 12);
          expect(ab[j]!).toBeCloseTo(a[j]! * b[j]! - a[half + j]! * b[half + j]!, 9);
          expect(ab[half + j]!).toBeCloseTo(a[half + j]! * b[j]! + a[j]! * b[half + j]!, 9);
        }
      }),
    );
  });

  it('writes rows first .. first+count-1 of a cache in the caller’s array, rounding once, and nothing else', () => {
    const angles = ropeAngles({ ropeBase: 10000, rotaryDim: 10 });
    const wide = new Float64Array(9 * 10).fill(-7);
    const narrow = new Float32Array(9 * 10).fill(-7);
    writeCosSinRows(wide, 3, 4, angles);
    writeCosSinRows(narrow, 3, 4, angles);
    for (let i = 0; i < wide.length; i++) {
      const inside = i >= 30 && i < 70;
      if (!inside) expect([wide[i], narrow[i]]).toEqual([-7, -7]);
      else expect(narrow[i]).toBe(Math.fround(wide[i]!));
    }
    expect(wide[50]).toBe(Math.cos(5 * angles.frequencies[0]!));
    expect(wide[69]).toBe(Math.sin(6 * angles.frequencies[4]!));
  });
});
