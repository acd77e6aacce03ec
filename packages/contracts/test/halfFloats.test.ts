import { describe, expect, it } from 'vitest';
import {
  decodeBf16,
  decodeF16,
  decodeHalves,
  encodeBf16,
  encodeF16,
  encodeHalves,
  encodeTensorData,
  roundToBf16,
  roundToF16,
} from '../src/backend/index.js';
import type { HalfDType } from '../src/backend/index.js';

/** The two formats in IEEE 754 terms, for the references below. */
const FORMATS = {
  f16: { fractionBits: 10, exponentBits: 5, bias: 15 },
  bf16: { fractionBits: 7, exponentBits: 8, bias: 127 },
} as const;
const DTYPES: readonly HalfDType[] = ['f16', 'bf16'];
const QUIET_NAN = { f16: 0x7e00, bf16: 0x7fc0 } as const;
const INFINITY = { f16: 0x7c00, bf16: 0x7f80 } as const;
const scalarEncode = { f16: encodeF16, bf16: encodeBf16 } as const;
const scalarDecode = { f16: decodeF16, bf16: decodeBf16 } as const;

/** The value of a code, from its sign, exponent and fraction by the IEEE 754 formula. */
function referenceValue(dtype: HalfDType, code: number): number {
  const { fractionBits: F, exponentBits: E, bias } = FORMATS[dtype];
  const sign = code >> 15 ? -1 : 1;
  const exponent = (code >> F) & ((1 << E) - 1);
  const fraction = code & ((1 << F) - 1);
  if (exponent === (1 << E) - 1) return fraction ? Number.NaN : sign * Infinity;
  if (exponent === 0) return sign * fraction * 2 ** (1 - bias - F);
  return sign * (1 + fraction / 2 ** F) * 2 ** (exponent - bias);
}

/**
 * The code nearest to `x` (ties to even), computed exactly with BigInt:
 * x = M * 2^E, rounded onto the format's grid at x's magnitude, then encoded.
 */
function referenceCode(dtype: HalfDType, x: number): number {
  const { fractionBits: F, exponentBits: E, bias } = FORMATS[dtype];
  if (Number.isNaN(x)) return QUIET_NAN[dtype];
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  if (!Number.isFinite(x)) return sign | INFINITY[dtype];
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, Math.abs(x));
  const bits = view.getBigUint64(0);
  const field = Number(bits >> 52n);
  const fraction = bits & ((1n << 52n) - 1n);
  const M = field === 0 ? fraction : fraction | (1n << 52n);
  const exp2 = field === 0 ? -1074 : field - 1075;
  if (M === 0n) return sign;
  const floorLog2 = M.toString(2).length - 1 + exp2;
  const quantum = Math.max(floorLog2, 1 - bias) - F; // the grid step at this magnitude is 2^quantum
  let k: bigint;
  if (exp2 >= quantum) k = M << BigInt(exp2 - quantum);
  else {
    const s = BigInt(quantum - exp2);
    k = M >> s;
    const rest = M - (k << s);
    const half = 1n << (s - 1n);
    if (rest > half || (rest === half && (k & 1n) === 1n)) k += 1n;
  }
  let q = quantum;
  if (k === 1n << BigInt(F + 1)) {
    k >>= 1n;
    q += 1;
  }
  if (k < 1n << BigInt(F)) return sign | Number(k); // subnormal (or the smallest normal, reached by rounding up)
  const biased = q + F + bias;
  if (biased >= (1 << E) - 1) return sign | INFINITY[dtype];
  return sign | (biased << F) | Number(k - (1n << BigInt(F)));
}

/** Codes of `values` through each way in: a Float64Array, a number[], the scalar form. */
function encodeEveryWay(dtype: HalfDType, values: readonly number[]): { f64: number[]; list: number[]; scalar: number[] } {
  const f64 = new Uint16Array(values.length);
  encodeHalves(dtype, Float64Array.from(values), f64);
  const list = new Uint16Array(values.length);
  encodeHalves(dtype, values, list);
  return { f64: Array.from(f64), list: Array.from(list), scalar: values.map(scalarEncode[dtype]) };
}

function expectEveryWay(dtype: HalfDType, values: readonly number[], want: readonly number[], what: string): void {
  const got = encodeEveryWay(dtype, values);
  for (const [way, codes] of Object.entries(got)) {
    const bad = codes.flatMap((c, i) => (c === want[i] ? [] : [`${values[i]} -> 0x${c.toString(16)}, want 0x${want[i]!.toString(16)}`]));
    expect(bad.slice(0, 5), `${dtype} ${what} via ${way}`).toEqual([]);
  }
}

const f64Words = new Float64Array(1);
const f64Bits = new BigUint64Array(f64Words.buffer);
/** The next f64 away from zero (up) or toward zero (down), for positive finite x. */
function f64Step(x: number, direction: 1 | -1): number {
  f64Words[0] = x;
  f64Bits[0] = f64Bits[0]! + BigInt(direction);
  return f64Words[0]!;
}

/** xorshift32: reproducible random words. */
function randomWords(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return s >>> 0;
  };
}

const allCodes = Uint16Array.from({ length: 65536 }, (_, c) => c);
const isNaNCode = (dtype: HalfDType, code: number) => Number.isNaN(referenceValue(dtype, code));

describe.each(DTYPES)('%s decode', (dtype) => {
  const F = FORMATS[dtype].fractionBits;

  it('every one of the 65536 codes decodes to its exact value; NaN keeps sign and payload', () => {
    const decoded = decodeHalves(dtype, allCodes);
    const bits = new Uint32Array(decoded.buffer);
    const bad: string[] = [];
    for (let c = 0; c < 65536; c++) {
      const want = referenceValue(dtype, c);
      const ok = Number.isNaN(want) ? bits[c] === (((c & 0x8000) << 16) | 0x7f800000 | ((c & ((1 << F) - 1)) << (23 - F))) >>> 0 : Object.is(decoded[c], want);
      if (!ok || !Object.is(scalarDecode[dtype](c), decoded[c])) bad.push(`0x${c.toString(16)}: ${decoded[c]}, want ${want}`);
    }
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it('decodes unaligned and odd-length views, into a given array', () => {
    const buffer = new Uint16Array(1001);
    const codes = buffer.subarray(1); // starts at byte 2: no whole words
    const next = randomWords(3);
    for (let i = 0; i < codes.length; i++) codes[i] = next() & 0xffff;
    const into = new Float32Array(codes.length + 1);
    const out = decodeHalves(dtype, codes.subarray(0, 999), into);
    expect(out).toBe(into);
    const want = Array.from(codes.subarray(0, 999), (c) => referenceValue(dtype, c));
    expect(Array.from(out.subarray(0, 999)).every((v, i) => Object.is(v, want[i]) || (Number.isNaN(v) && Number.isNaN(want[i])))).toBe(true);
    expect(out[999]).toBe(0);
  });
});

describe.each(DTYPES)('%s encode', (dtype) => {
  const { fractionBits: F, exponentBits: E, bias } = FORMATS[dtype];
  const maxFinite = INFINITY[dtype] - 1;
  const overflowAt = 2 ** ((1 << E) - 1 - bias); // where the exponent would go past the largest

  it('every representable value maps back to its code, from f32, f64, number[] and scalar', () => {
    const codes = Array.from(allCodes).filter((c) => !isNaNCode(dtype, c));
    const values = codes.map((c) => referenceValue(dtype, c));
    expectEveryWay(dtype, values, codes, 'representable values');
    const fromF32 = new Uint16Array(values.length);
    encodeHalves(dtype, Float32Array.from(values), fromF32);
    expect(Array.from(fromF32)).toEqual(codes);
  });

  it('rounds every midpoint to the even neighbour, and one f64 ulp either side away from it, both signs', () => {
    for (const sign of [1, -1]) {
      const mids: number[] = [];
      const below: number[] = [];
      const above: number[] = [];
      const wantTie: number[] = [];
      const wantBelow: number[] = [];
      const wantAbove: number[] = [];
      const s = sign < 0 ? 0x8000 : 0;
      for (let c = 0; c <= maxFinite; c++) {
        const upper = c === maxFinite ? overflowAt : referenceValue(dtype, c + 1);
        const mid = (referenceValue(dtype, c) + upper) / 2; // exact: both are short multiples of a power of two
        mids.push(sign * mid);
        below.push(sign * f64Step(mid, -1));
        above.push(sign * f64Step(mid, 1));
        wantTie.push(s | (c % 2 === 0 ? c : c + 1));
        wantBelow.push(s | c);
        wantAbove.push(s | (c + 1)); // past the largest finite value that is Infinity's code
      }
      expectEveryWay(dtype, mids, wantTie, 'midpoints');
      expectEveryWay(dtype, below, wantBelow, 'just below midpoints');
      expectEveryWay(dtype, above, wantAbove, 'just above midpoints');
      // The midpoints are f32 values too; so are their f32 neighbours, which round the same way.
      const f32Mids = Float32Array.from(mids);
      expect(Array.from(f32Mids)).toEqual(mids);
      const step = (x: number, d: 1 | -1) => {
        const b = new Uint32Array(Float32Array.of(x).buffer);
        b[0] = b[0]! + d;
        return new Float32Array(b.buffer)[0]!;
      };
      for (const [values, want, what] of [
        [f32Mids, wantTie, 'f32 midpoints'],
        [Float32Array.from(mids, (m) => sign * step(sign * m, -1)), wantBelow, 'f32 just below midpoints'],
        [Float32Array.from(mids, (m) => sign * step(sign * m, 1)), wantAbove, 'f32 just above midpoints'],
      ] as const) {
        const out = new Uint16Array(values.length);
        encodeHalves(dtype, values, out);
        const bad = Array.from(out).flatMap((c, i) => (c === want[i] ? [] : [`${values[i]} -> 0x${c.toString(16)}`]));
        expect(bad.slice(0, 5), `${dtype} ${what}`).toEqual([]);
      }
    }
  });

  it('rounds once from the f64 value, never through f32', () => {
    // Through f32 these land exactly on a tie and go to even; straight from f64 they are just above it.
    const x = 1 + 2 ** (-F - 1) + 2 ** -40;
    expect(Math.fround(x)).toBe(1 + 2 ** (-F - 1));
    expectEveryWay(dtype, [x, -x], [(bias << F) | 1, 0x8000 | (bias << F) | 1], 'above a tie by less than an f32 ulp');
  });

  it('subnormal/normal boundary, largest finite, overflow, signed zeros', () => {
    const smallestNormal = 2 ** (1 - bias);
    const subnormalStep = 2 ** (1 - bias - F);
    const largest = referenceValue(dtype, maxFinite);
    const cases: [number, number][] = [
      [0, 0],
      [-0, 0x8000],
      [smallestNormal, 1 << F],
      [smallestNormal - subnormalStep, (1 << F) - 1],
      [smallestNormal - subnormalStep / 2, 1 << F], // a tie: the even code is the smallest normal
      [subnormalStep, 1],
      [subnormalStep / 2, 0], // a tie with zero
      [-subnormalStep / 2, 0x8000],
      [f64Step(subnormalStep / 2, 1), 1],
      [-Number.MIN_VALUE, 0x8000],
      [largest, maxFinite],
      [f64Step((largest + overflowAt) / 2, -1), maxFinite],
      [(largest + overflowAt) / 2, INFINITY[dtype]],
      [overflowAt, INFINITY[dtype]],
      [-Number.MAX_VALUE, 0x8000 | INFINITY[dtype]],
      [Infinity, INFINITY[dtype]],
      [-Infinity, 0x8000 | INFINITY[dtype]],
    ];
    expectEveryWay(dtype, cases.map(([x]) => x), cases.map(([, c]) => c), 'boundaries');
    expect(Object.is(scalarDecode[dtype](scalarEncode[dtype](-Number.MIN_VALUE)), -0)).toBe(true);
  });

  it('turns every NaN, whatever its sign and payload, into the quiet NaN', () => {
    const f32Nans = Uint32Array.of(0x7f800001, 0x7fc00000, 0x7fffffff, 0xff800001, 0xffc00000, 0xffffffff, 0x7fa00000, 0x7f802000);
    const out = new Uint16Array(f32Nans.length);
    encodeHalves(dtype, new Float32Array(f32Nans.buffer), out);
    expect(Array.from(out)).toEqual(Array(f32Nans.length).fill(QUIET_NAN[dtype]));
    // f64 NaNs, one of them with its payload only in the low word.
    const f64Nans = new Float64Array(BigUint64Array.of(0x7ff0000000000001n, 0x7ff8000000000000n, 0xfff0000000000001n, 0x7ff0000100000000n, 0xffffffffffffffffn).buffer);
    expectEveryWay(dtype, Array.from(f64Nans), Array(f64Nans.length).fill(QUIET_NAN[dtype]), 'f64 NaNs');
    const fromF64 = new Uint16Array(f64Nans.length);
    encodeHalves(dtype, f64Nans, fromF64); // straight from the words, payloads and all
    expect(Array.from(fromF64)).toEqual(Array(f64Nans.length).fill(QUIET_NAN[dtype]));
    expect(Number.isNaN(scalarDecode[dtype](QUIET_NAN[dtype]))).toBe(true);
  });

  it('agrees with the exact reference on 100 000 random f64 and 100 000 random f32 inputs', () => {
    const next = randomWords(dtype === 'f16' ? 11 : 12);
    const wide = new Float64Array(100_000);
    const wideWords = new Uint32Array(wide.buffer);
    for (let i = 0; i < wide.length; i++) {
      wideWords[2 * i] = next();
      // Half the draws anywhere, half with an exponent near the format's range, where rounding is decided.
      const hi = next();
      wideWords[2 * i + 1] = i % 2 ? hi : (hi & 0x800fffff) | ((1023 - bias - F - 4 + (next() % ((1 << E) + F + 8))) << 20);
    }
    expectEveryWay(dtype, Array.from(wide), Array.from(wide, (x) => referenceCode(dtype, x)), 'random f64');
    const narrow = new Float32Array(100_000);
    const narrowWords = new Uint32Array(narrow.buffer);
    for (let i = 0; i < narrow.length; i++) {
      const w = next();
      narrowWords[i] = i % 2 ? w : (w & 0x807fffff) | (((127 - bias - F - 4 + (next() % ((1 << E) + F + 8))) & 0xff) << 23);
    }
    const out = new Uint16Array(narrow.length);
    encodeHalves(dtype, narrow, out);
    const bad = Array.from(out).flatMap((c, i) => (c === referenceCode(dtype, narrow[i]!) ? [] : [`${narrow[i]} -> 0x${c.toString(16)}`]));
    expect(bad.slice(0, 5)).toEqual([]);
  });

  it('gives the same codes from a Float32Array as from its values in a number[], at any offset and length', () => {
    const next = randomWords(dtype === 'f16' ? 21 : 22);
    const count = 10_001; // past one internal chunk, and odd
    const values = new Float32Array(count);
    const words = new Uint32Array(values.buffer);
    for (let i = 0; i < count; i++) words[i] = i % 3 ? (next() & 0x807fffff) | ((110 + (next() % 30)) << 23) : next();
    const fromF32 = new Uint16Array(count);
    encodeHalves(dtype, values, fromF32);
    const fromList = new Uint16Array(count + 1).subarray(1); // unaligned: no whole words to write
    encodeHalves(dtype, Array.from(values), fromList);
    expect(Array.from(fromList)).toEqual(Array.from(fromF32));
    const fromInts = new Uint16Array(3);
    encodeHalves(dtype, Int32Array.of(-3, 70000, 1 << 30), fromInts);
    expect(Array.from(fromInts)).toEqual([-3, 70000, 1 << 30].map((x) => referenceCode(dtype, x)));
    expect(() => encodeHalves(dtype, [1, 2, 3], new Uint16Array(2))).toThrow(RangeError);
  });

  it('roundTo gives the value of the nearest code', () => {
    const round = dtype === 'f16' ? roundToF16 : roundToBf16;
    for (const x of [0.1, -1 / 3, 1e-6, -1e-40, 3e38, 65519, 65520]) expect(Object.is(round(x), referenceValue(dtype, referenceCode(dtype, x)))).toBe(true);
    expect(Number.isNaN(round(Number.NaN))).toBe(true);
  });
});

describe('encodeTensorData', () => {
  it('f32: a Float32Array bit for bit, anything else rounded once', () => {
    const nan = new Float32Array(Uint32Array.of(0x7fa00001, 0x80000000).buffer);
    const out = new Float32Array(2);
    encodeTensorData('f32', nan, out);
    expect(Array.from(new Uint32Array(out.buffer))).toEqual([0x7fa00001, 0x80000000]);
    const wide = new Float32Array(3);
    encodeTensorData('f32', [1 + 2 ** -24 + 2 ** -50, 1e39, -1e-50], wide);
    expect(Array.from(wide)).toEqual([1 + 2 ** -23, Infinity, -0]);
  });

  it('f16 and bf16 through the codec', () => {
    for (const dtype of DTYPES) {
      const out = new Uint16Array(3);
      encodeTensorData(dtype, Float64Array.of(0.1, -2, 65520), out);
      expect(Array.from(out)).toEqual([0.1, -2, 65520].map((x) => referenceCode(dtype, x)));
    }
  });

  it('i32 from numbers, bigints and typed arrays', () => {
    const out = new Int32Array(3);
    encodeTensorData('i32', [-(2 ** 31), 7, 2 ** 31 - 1], out);
    expect(Array.from(out)).toEqual([-(2 ** 31), 7, 2 ** 31 - 1]);
    encodeTensorData('i32', [-3n, 7n, 2n ** 31n - 1n], out);
    expect(Array.from(out)).toEqual([-3, 7, 2 ** 31 - 1]);
    encodeTensorData('i32', BigInt64Array.of(-5n, 0n, 9n), out);
    expect(Array.from(out)).toEqual([-5, 0, 9]);
    encodeTensorData('i32', Uint16Array.of(65535, 1, 2), out);
    expect(Array.from(out)).toEqual([65535, 1, 2]);
  });

  it('i64 from safe integers (as two words), bigints and typed arrays', () => {
    const values = [0, -1, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 32, -(2 ** 32) - 1, 4294967295, -2147483649];
    const out = new BigInt64Array(values.length);
    encodeTensorData('i64', values, out);
    expect(Array.from(out)).toEqual(values.map(BigInt));
    const big = [2n ** 63n - 1n, -(2n ** 63n), 5n];
    const fromBig = new BigInt64Array(3);
    encodeTensorData('i64', big, fromBig);
    expect(Array.from(fromBig)).toEqual(big);
    encodeTensorData('i64', Uint32Array.of(4294967295, 0, 1), fromBig);
    expect(Array.from(fromBig)).toEqual([4294967295n, 0n, 1n]);
  });
});
