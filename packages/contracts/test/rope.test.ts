import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { exactTurns, float32Angle, float32Frequencies, ropeAngles, ropeAnglesKey, ropeAngleTable, ropeFrequencies, turnsAt, writeCosSinRow, writeCosSinRows } from '../src/backend/index.js';
import type { RopeScaling } from '../src/backend/index.js';

const base = fc.double({ min: 1.5, max: 1e7, noNaN: true });
const rotary = fc.integer({ min: 1, max: 96 }).map((h) => 2 * h);

describe('ropeFrequencies', () => {
  it('is base^(-2j/R) for j < R/2, as exp(-2j/R · ln base) computes it', async () => {
    await forEverySeed(100, (run) => fc.assert(
      fc.property(base, rotary, (ropeBase, rotaryDim) => {
        const f = ropeFrequencies({ ropeBase, rotaryDim });
        expect(f).toHaveLength(rotaryDim / 2);
        for (const [j, fj] of f.entries()) expect(Math.abs(fj - Math.exp((-2 * j * Math.log(ropeBase)) / rotaryDim))).toBeLessThanOrEqual(1e-14 * fj);
        for (let j = 1; j < f.length; j++) expect(f[j]!).toBeLessThan(f[j - 1]!);
      }),
      run,
    ));
  });

  it('ropeAngles gives the same frequencies, magnitude 1, exact angles by default', () => {
    const spec = { ropeBase: 500000, rotaryDim: 6 };
    const angles = ropeAngles(spec);
    expect(angles.frequencies).toEqual(ropeFrequencies(spec));
    expect([angles.magnitude, angles.mode]).toEqual([1, 'exact']);
  });
});

describe('cos/sin rows', () => {
  it('row p is cos(p·f) ‖ sin(p·f): unit pairs, and rows add like angles', async () => {
    await forEverySeed(100, (run) => fc.assert(
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
      run,
    ));
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
    expect(Math.abs(wide[50]! - Math.cos(5 * angles.frequencies[0]!))).toBeLessThan(1e-15);
    expect(Math.abs(wide[69]! - Math.sin(6 * angles.frequencies[4]!))).toBeLessThan(1e-15);
  });
});

describe('scaled frequencies, each from its published formula', () => {
  const R = 128;
  const plain = (ropeBase: number) => ropeFrequencies({ ropeBase, rotaryDim: R });
  const of = (ropeBase: number, ropeScaling: RopeScaling) => ropeAngles({ ropeBase, rotaryDim: R, ropeScaling });

  it('linear divides every frequency by the factor', () => {
    const a = of(1e4, { type: 'linear', factor: 2.5 });
    for (const [j, f] of plain(1e4).entries()) expect(a.frequencies[j]).toBe(f / 2.5);
    expect(a.magnitude).toBe(1);
  });

  it('dynamic grows the base for a longer sequence only, factor·context by default', () => {
    const scaling = { type: 'dynamic', factor: 4, originalMaxPositions: 2048 } as const;
    expect(of(1e4, { ...scaling, sequenceLength: 2048 }).frequencies).toEqual(plain(1e4));
    const grown = 1e4 * ((4 * 8192) / 2048 - 3) ** (R / (R - 2));
    expect(of(1e4, scaling).frequencies).toEqual(plain(grown));
    expect(of(1e4, { ...scaling, sequenceLength: 8192 }).frequencies).toEqual(plain(grown));
  });

  it('llama3 keeps short wavelengths, divides long ones, and blends the band between', () => {
    const s = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } as const;
    const a = of(500000, s).frequencies;
    let kept = 0;
    let divided = 0;
    plain(500000).forEach((f, j) => {
      const wavelength = (2 * Math.PI) / f;
      if (wavelength < 8192 / 4) kept += Number(a[j] === f);
      else if (wavelength > 8192) divided += Number(a[j] === f / 8);
      else {
        const smooth = (8192 / wavelength - 1) / 3;
        expect(a[j]).toBeCloseTo((1 - smooth) * (f / 8) + smooth * f, 15);
      }
    });
    // Llama 3.1 8B (R = 128): 2π·500000^(j/64) < 2048 for j <= 28, > 8192 for j >= 35: 29 kept, 29 divided, 6 blended.
    expect([kept, divided]).toEqual([29, 29]);
  });

  it('yarn extrapolates below the ramp, interpolates above it, and scales cos/sin by 0.1·ln(factor) + 1', () => {
    const a = of(1e6, { type: 'yarn', factor: 4, originalMaxPositions: 32768 });
    const f = plain(1e6);
    const pairAt = (rotations: number) => (R * Math.log(32768 / (rotations * 2 * Math.PI))) / (2 * Math.log(1e6));
    const [low, high] = [Math.floor(pairAt(32)), Math.ceil(pairAt(1))];
    for (let j = 0; j < R / 2; j++) {
      if (j <= low) expect(a.frequencies[j]).toBe(f[j]);
      if (j >= high) expect(a.frequencies[j]).toBe(f[j]! / 4);
      if (j > low && j < high) expect(a.frequencies[j]!).toBeLessThan(f[j]!);
    }
    expect(a.magnitude).toBe(0.1 * Math.log(4) + 1);
    expect(of(1e6, { type: 'yarn', factor: 40, originalMaxPositions: 4096, mscale: 1, mscaleAllDim: 1 }).magnitude).toBe(1);
    expect(of(1e6, { type: 'yarn', factor: 4, originalMaxPositions: 4096, attentionFactor: 0.7 }).magnitude).toBe(0.7);
  });

  // DeepSeek-V2-Lite's mscale, as its config writes it (not 1/√2).
  const V2_LITE_MSCALE = 707 / 1000;

  it("yarn's DeepSeek magnitude is g(factor, mscale) / g(factor, mscaleAllDim) only when both are given and non-zero, as transformers' _compute_yarn_parameters", () => {
    const g = (m: number) => 0.1 * m * Math.log(40) + 1;
    const yarn = { type: 'yarn', factor: 40, originalMaxPositions: 4096 } as const;
    // DeepSeek-V3 (1, 1) and DeepSeek-V2-Lite (0.707, 0.707): equal, so 1; the softmax scale carries mscale² there, not cos and sin.
    expect(of(10000, { ...yarn, mscale: 1, mscaleAllDim: 1 }).magnitude).toBe(1);
    expect(of(10000, { ...yarn, mscale: V2_LITE_MSCALE, mscaleAllDim: V2_LITE_MSCALE }).magnitude).toBe(1);
    expect(of(10000, { ...yarn, mscale: 1, mscaleAllDim: V2_LITE_MSCALE }).magnitude).toBe(g(1) / g(V2_LITE_MSCALE));
    // Python's `if mscale and mscale_all_dim`: one of them missing or 0 falls back to g(factor, 1).
    for (const m of [{ mscale: V2_LITE_MSCALE }, { mscaleAllDim: 1 }, { mscale: 1, mscaleAllDim: 0 }, { mscale: 0, mscaleAllDim: 1 }]) expect(of(10000, { ...yarn, ...m }).magnitude).toBe(g(1));
    // attentionFactor wins over both; a factor of 1 leaves every g at 1.
    expect(of(10000, { ...yarn, mscale: 1, mscaleAllDim: 0.5, attentionFactor: 0.9 }).magnitude).toBe(0.9);
    expect(of(10000, { ...yarn, factor: 1, mscale: 1, mscaleAllDim: 0.5 }).magnitude).toBe(1);
    // The frequencies do not depend on mscale.
    expect(of(10000, { ...yarn, mscale: 1, mscaleAllDim: V2_LITE_MSCALE }).frequencies).toEqual(of(10000, yarn).frequencies);
    expect(ropeAngles({ ropeBase: 10000, rotaryDim: R, ropeScaling: { ...yarn, mscale: 1, mscaleAllDim: V2_LITE_MSCALE }, angles: 'float32' }).magnitude).toBe(Math.fround(g(1) / g(V2_LITE_MSCALE)));
  });

  it('longrope divides each frequency by its own factor, long ones past the original context, and scales by sqrt(1 + ln(factor) / ln(original))', () => {
    const half = R / 2;
    const shortFactor = Array.from({ length: half }, (_, j) => 1 + j / 64);
    const longFactor = Array.from({ length: half }, (_, j) => 1 + j / 2);
    const lr = { type: 'longrope', shortFactor, longFactor, originalMaxPositions: 4096 } as const;
    const f = plain(10000);
    const divided = (factors: readonly number[]) => f.map((x, j) => x / factors[j]!);
    // No factor and no sequence length: the short factors, magnitude 1.
    expect(of(10000, lr).frequencies).toEqual(divided(shortFactor));
    expect(of(10000, lr).magnitude).toBe(1);
    // factor 32 (Phi-3-mini-128k: 131072 / 4096) picks the long ones by default, and its magnitude.
    const phi = { ...lr, factor: 32 } as const;
    expect(of(10000, phi).frequencies).toEqual(divided(longFactor));
    expect(of(10000, phi).magnitude).toBe(Math.sqrt(1 + Math.log(32) / Math.log(4096)));
    expect(of(10000, phi).magnitude).toBeCloseTo(1.1902380714238083, 15);
    // The sequence length picks: long only above the original context; the magnitude stays the factor's.
    expect(of(10000, { ...phi, sequenceLength: 4096 }).frequencies).toEqual(divided(shortFactor));
    expect(of(10000, { ...phi, sequenceLength: 4097 }).frequencies).toEqual(divided(longFactor));
    expect(of(10000, { ...phi, sequenceLength: 10 }).magnitude).toBe(of(10000, phi).magnitude);
    expect(of(10000, { ...phi, attentionFactor: 1.5 }).magnitude).toBe(1.5);
    expect(of(10000, { ...lr, factor: 1, sequenceLength: 99999 }).magnitude).toBe(1);
  });

  it("longrope in 'float32' is transformers' 1.0 / (ext_factors * base ** (arange(0, R, 2).float() / R)) in f32 steps", () => {
    const F = Math.fround;
    const shortFactor = [1, 1.0299999713897705, 1.25, 3.5];
    const a = ropeAngles({ ropeBase: 10000, rotaryDim: 8, angles: 'float32', ropeScaling: { type: 'longrope', shortFactor, longFactor: [1, 1, 1, 1], originalMaxPositions: 4096, factor: 32, sequenceLength: 100 } });
    // base ** (2j/8) in f32: 1, 10, 100, 1000, all exact.
    expect(Array.from(a.frequencies)).toEqual([1, 10, 100, 1000].map((p, j) => F(1 / F(F(shortFactor[j]!) * p))));
    expect(a.magnitude).toBe(F(Math.sqrt(1 + Math.log(32) / Math.log(4096))));
  });

  it('keys the angle table of a longrope spec by the list its sequence length picks, not by the length', () => {
    const lr = { type: 'longrope', shortFactor: [1, 2], longFactor: [3, 4], originalMaxPositions: 64, factor: 4 } as const;
    const key = (sequenceLength?: number) => ropeAnglesKey({ ropeBase: 1e4, rotaryDim: 4, ropeScaling: { ...lr, ...(sequenceLength ? { sequenceLength } : {}) } });
    expect(new Set([key(1), key(10), key(64)]).size).toBe(1);
    expect(new Set([key(65), key(1000), key()]).size).toBe(1);
    expect(key(64)).not.toBe(key(65));
    expect(ropeAnglesKey({ ropeBase: 1e4, rotaryDim: 4, angles: 'float32' })).not.toBe(ropeAnglesKey({ ropeBase: 1e4, rotaryDim: 4 }));
  });

  it('longrope factors below 1 give frequencies past 1; the exact turns are still those of p·f', () => {
    const a = ropeAngles({ ropeBase: 10000, rotaryDim: 4, ropeScaling: { type: 'longrope', shortFactor: [0.1, 1], longFactor: [1, 1], originalMaxPositions: 64 } });
    expect(a.frequencies[0]).toBe(10);
    for (const p of [1, 3, 1000, 2 ** 31 - 1]) expect(Math.abs(turnsAt(p, a.turns, 0) - exactTurns(p, 10))).toBeLessThan(1e-15);
  });
});

describe('exact angles', () => {
  it('reduces p·f to turns exactly: small cases by hand, large ones against a second computation', () => {
    expect(exactTurns(0, 0.5)).toBe(0);
    expect(exactTurns(3, 1e-9)).toBeCloseTo((3 * 1e-9) / (2 * Math.PI), 24);
    // 2π·(p/2π) is p itself, less whole turns.
    for (const p of [1, 7, 100, 12345]) expect(2 * Math.PI * exactTurns(p, 1) - (p - 2 * Math.PI * Math.round(p / (2 * Math.PI)))).toBeCloseTo(0, 11);
    expect(exactTurns(-5, 0.25)).toBe(-exactTurns(5, 0.25));
  });

  it('the f64 fast path of the reference agrees with the integer oracle to 1e-15 turns below 2^31', async () => {
    const angles = ropeAngles({ ropeBase: 500000, rotaryDim: 64 });
    await forEverySeed(100, (run) => fc.assert(
      fc.property(fc.integer({ min: 0, max: 2 ** 31 - 1 }), fc.integer({ min: 0, max: 31 }), (p, j) => {
        expect(Math.abs(turnsAt(p, angles.turns, j) - exactTurns(p, angles.frequencies[j]!))).toBeLessThan(1e-15);
      }),
      run,
    ));
  });

  it('an f32 angle at p = 2^31 - 1 is off by turns; the exact one is not', () => {
    const f = ropeFrequencies({ ropeBase: 10000, rotaryDim: 8 })[1]!;
    const p = 2 ** 31 - 1;
    const exact = 2 * Math.PI * exactTurns(p, f);
    const rounded = Math.fround(p * Math.fround(f));
    expect(Math.abs(Math.cos(rounded) - Math.cos(exact))).toBeGreaterThan(1e-3);
  });
});

describe("angles: 'float32'", () => {
  it("has torch's f32 inverse frequencies and the angle fround(fround(p)·f) bit for bit", () => {
    // 1 / 10000 ** (arange(0, 8, 2).float() / 8) in f32: 1, 0.1, 0.01, 0.001 each rounded to f32.
    expect(Array.from(float32Frequencies(10000, 8))).toEqual([1, 0.1, 0.01, 0.001].map(Math.fround));
    const a = ropeAngles({ ropeBase: 10000, rotaryDim: 8, angles: 'float32' });
    const row = new Float64Array(8);
    const p = 16777217; // 2^24 + 1: rounds to 2^24 as an f32 position
    writeCosSinRow(row, 0, p, a);
    expect(row[1]).toBe(Math.cos(Math.fround(2 ** 24 * Math.fround(0.1))));
    expect(float32Angle(p, a.frequencies[1]!)).toBe(Math.fround(2 ** 24 * Math.fround(0.1)));
    expect(ropeAngles({ ropeBase: 10000, rotaryDim: 8, angles: 'float32', ropeScaling: { type: 'linear', factor: 3 } }).frequencies[2]).toBe(Math.fround(Math.fround(0.01) / 3));
  });
});

describe('the device angle table', () => {
  it('holds the mode, the magnitude, R/2, each pair\'s fraction and f32 frequency, then 2^e / 2π mod 1', () => {
    const a = ropeAngles({ ropeBase: 1e6, rotaryDim: 6, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 4096 } });
    const t = ropeAngleTable(a);
    const f32 = new Float32Array(t.buffer);
    expect([t[0], f32[1], t[2]]).toEqual([0, Math.fround(a.magnitude), 3]);
    for (let j = 0; j < 3; j++) {
      expect(Array.from(t.subarray(4 + 4 * j, 7 + 4 * j))).toEqual(Array.from(a.turns.subarray(3 * j, 3 * j + 3)));
      expect(f32[7 + 4 * j]).toBe(Math.fround(a.frequencies[j]!));
      // The leading word is f_j/2π · 2^32, truncated.
      expect(t[4 + 4 * j]).toBe(Math.floor((a.frequencies[j]! / (2 * Math.PI)) * 2 ** 32));
    }
    // 2^0 / 2π = 0.159154943..., whose first 32 bits are 0x28be60db.
    expect(t[4 + 12 + 4 * 24]).toBe(0x28be60db);
    expect(ropeAngleTable(ropeAngles({ ropeBase: 1e4, rotaryDim: 6, angles: 'float32' }))[0]).toBe(1);
  });
});
