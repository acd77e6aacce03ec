import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { createCpuBackend, roundToBf16, roundToF16 } from '../src/index.js';
// The generic rounding is internal; it is tested here against Math.fround, the one rounding the platform gets right.
import { F32_FORMAT, roundToFormat } from '../src/numerics/rounding.js';

/** The value of an f16 bit pattern, straight from the IEEE 754 definition. */
function f16Value(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >> 10) & 0x1f;
  const fraction = bits & 0x3ff;
  if (exponent === 0x1f) return fraction ? Number.NaN : sign * Infinity;
  if (exponent === 0) return sign * (fraction / 1024) * 2 ** -14;
  return sign * (1 + fraction / 1024) * 2 ** (exponent - 15);
}

/** The value of a bf16 bit pattern: the high half of an f32. */
function bf16Value(bits: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, bits << 16);
  return view.getFloat32(0);
}

/**
 * Round to nearest by brute force: every non-negative finite value of the
 * format, plus Infinity standing at the next power of two (where the
 * exponent would go), nearest wins, a tie goes to the even bit pattern.
 */
function bruteForce(valueOfBits: (bits: number) => number, infinityBits: number, infinityAt: number) {
  const values: number[] = [];
  const patterns: number[] = [];
  for (let b = 0; b < infinityBits; b++) {
    values.push(valueOfBits(b));
    patterns.push(b);
  }
  values.push(infinityAt);
  patterns.push(infinityBits);
  return (x: number): number => {
    if (Number.isNaN(x)) return Number.NaN;
    const a = Math.abs(x);
    let chosen: number;
    if (a >= infinityAt) chosen = values.length - 1;
    else {
      let lo = 0;
      let hi = values.length - 1;
      while (hi - lo > 1) {
        const mid = (lo + hi) >> 1;
        if (values[mid]! <= a) lo = mid;
        else hi = mid;
      }
      const below = a - values[lo]!;
      const above = values[hi]! - a;
      chosen = below < above ? lo : above < below ? hi : patterns[lo]! % 2 === 0 ? lo : hi;
    }
    const v = chosen === values.length - 1 ? Infinity : values[chosen]!;
    return x < 0 || Object.is(x, -0) ? -v : v;
  };
}

const f16Oracle = bruteForce(f16Value, 0x7c00, 2 ** 16);
const bf16Oracle = bruteForce(bf16Value, 0x7f80, 2 ** 128);

/** Doubles a rounding can get wrong: anywhere, in range, near subnormals, exact ties between neighbours, and just off them. */
function interesting(valueOfBits: (bits: number) => number, largestFinite: number, smallestNormal: number): fc.Arbitrary<number> {
  const tie = fc.tuple(fc.integer({ min: 0, max: largestFinite - 1 }), fc.boolean()).map(([b, negative]) => {
    const mid = (valueOfBits(b) + valueOfBits(b + 1)) / 2;
    return negative ? -mid : mid;
  });
  const nearTie = fc.tuple(tie, fc.integer({ min: -3, max: 3 })).map(([m, k]) => m * (1 + k * 2 ** -45));
  const top = valueOfBits(largestFinite);
  return fc.oneof(
    fc.double(),
    fc.double({ min: -2 * top, max: 2 * top }),
    fc.double({ min: -4 * smallestNormal, max: 4 * smallestNormal }),
    tie,
    nearTie,
    fc.constantFrom(top, -top, (top + 2 * top * (1 + 2 ** -30)) / 2, top * (1 + 2 ** -9), Infinity, -Infinity, Number.NaN, 0, -0),
  );
}

describe('generic rounding', () => {
  it('with f32 parameters equals Math.fround for arbitrary doubles', () => {
    const f32Value = (bits: number) => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
    fc.assert(
      fc.property(interesting(f32Value, 0x7f7fffff, 2 ** -126), (x) => Object.is(roundToFormat(x, F32_FORMAT), Math.fround(x))),
      { numRuns: 20000 },
    );
  });
});

describe('f16 and bf16 rounding', () => {
  it('roundToF16 is the nearest f16 value, ties to even (brute force)', () => {
    fc.assert(
      fc.property(interesting(f16Value, 0x7bff, 2 ** -14), (x) => Object.is(roundToF16(x), f16Oracle(x))),
      { numRuns: 20000 },
    );
  });

  it('roundToBf16 is the nearest bf16 value, ties to even (brute force)', () => {
    fc.assert(
      fc.property(interesting(bf16Value, 0x7f7f, 2 ** -126), (x) => Object.is(roundToBf16(x), bf16Oracle(x))),
      { numRuns: 20000 },
    );
  });

  it('rounds once from the double, never through f32', () => {
    // Via f32 each lands on an exact tie and rounds to even (1); straight from f64 it is above the tie.
    const bf = 1 + 2 ** -8 + 2 ** -30;
    const half = 1 + 2 ** -11 + 2 ** -40;
    expect(roundToBf16(bf)).toBe(1 + 2 ** -7);
    expect(roundToBf16(Math.fround(bf))).toBe(1);
    expect(roundToF16(half)).toBe(1 + 2 ** -10);
    expect(roundToF16(Math.fround(half))).toBe(1);
  });

  it('keeps subnormals, overflows to infinity, keeps NaN and the sign of zero', () => {
    expect(roundToF16(2 ** -24)).toBe(2 ** -24);
    expect(roundToF16(2 ** -25)).toBe(0); // a tie with zero: even
    expect(roundToF16(2 ** -25 * (1 + 2 ** -20))).toBe(2 ** -24);
    expect(roundToF16(3 * 2 ** -25)).toBe(2 ** -23);
    expect(roundToF16(65504)).toBe(65504);
    expect(roundToF16(65519.99)).toBe(65504);
    expect(roundToF16(65520)).toBe(Infinity);
    expect(roundToF16(-1e9)).toBe(-Infinity);
    expect(roundToBf16(3.4e38)).toBe(Infinity);
    expect(roundToBf16(2 ** -133)).toBe(2 ** -133);
    expect(Number.isNaN(roundToF16(Number.NaN))).toBe(true);
    expect(Object.is(roundToF16(-1e-30), -0)).toBe(true);
    expect(Object.is(roundToBf16(-0), -0)).toBe(true);
  });
});

describe('f16 and bf16 storage', () => {
  for (const [dtype, valueOfBits, count] of [
    ['f16', f16Value, 0x10000],
    ['bf16', bf16Value, 0x10000],
  ] as const) {
    it(`every ${dtype} value survives tensor() and read() unchanged`, async () => {
      const backend = createCpuBackend();
      const values = Array.from({ length: count }, (_, b) => valueOfBits(b));
      const back = await backend.read(backend.tensor(dtype, [count], values));
      for (let b = 0; b < count; b++) {
        const v = values[b]!;
        if (Number.isNaN(v)) expect(Number.isNaN(back[b]!)).toBe(true);
        else if (!Object.is(back[b], v)) expect.fail(`${dtype} bits ${b.toString(16)}: ${v} read back as ${back[b]}`);
      }
    });
  }

  it('tensor() rounds each given double once, to nearest even', async () => {
    const backend = createCpuBackend();
    const doubles = fc.oneof(interesting(f16Value, 0x7bff, 2 ** -14), interesting(bf16Value, 0x7f7f, 2 ** -126));
    expect(await backend.read(backend.tensor('bf16', [1], [1 + 2 ** -8 + 2 ** -30]))).toEqual(new Float32Array([1 + 2 ** -7]));
    expect(await backend.read(backend.tensor('f16', [1], [1 + 2 ** -11 + 2 ** -40]))).toEqual(new Float32Array([1 + 2 ** -10]));
    await fc.assert(
      fc.asyncProperty(fc.array(doubles, { minLength: 1, maxLength: 64 }), async (data) => {
        const f16 = await backend.read(backend.tensor('f16', [data.length], data));
        const bf16 = await backend.read(backend.tensor('bf16', [data.length], data));
        const f32 = await backend.read(backend.tensor('f32', [data.length], data));
        data.forEach((x, i) => {
          expect(Object.is(f16[i], f16Oracle(x))).toBe(true);
          expect(Object.is(bf16[i], bf16Oracle(x))).toBe(true);
          expect(Object.is(f32[i], Math.fround(x))).toBe(true);
        });
      }),
      { numRuns: 200 },
    );
  });
});
