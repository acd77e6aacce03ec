import { describe, expect, it } from 'vitest';
import { decodeFp8, decodeFp8s, encodeFp8, encodeFp8s, encodeTensorData, fp8Max, roundToFp8 } from '../src/backend/index.js';
import type { Fp8DType } from '../src/tensor.js';

/** Each format in IEEE 754 terms, for the references below. */
const FORMATS = {
  fp8e4m3: { fraction: 3, exponentBits: 4, bias: 7, ieeeTop: false },
  fp8e5m2: { fraction: 2, exponentBits: 5, bias: 15, ieeeTop: true },
} as const;
const DTYPES: readonly Fp8DType[] = ['fp8e4m3', 'fp8e5m2'];
const CODES = Array.from({ length: 256 }, (_, c) => c);

/** The value of a code from its sign, exponent and fraction fields. */
function referenceValue(dtype: Fp8DType, code: number): number {
  const { fraction: F, exponentBits: E, bias, ieeeTop } = FORMATS[dtype];
  const sign = code & 0x80 ? -1 : 1;
  const exponent = (code >> F) & ((1 << E) - 1);
  const mantissa = code & ((1 << F) - 1);
  if (ieeeTop && exponent === (1 << E) - 1) return mantissa ? Number.NaN : sign * Infinity;
  if (!ieeeTop && (code & 0x7f) === 0x7f) return Number.NaN;
  if (exponent === 0) return sign * mantissa * 2 ** (1 - bias - F);
  return sign * (1 + mantissa / 2 ** F) * 2 ** (exponent - bias);
}

/** The finite codes of one sign, in value order, with their values. */
function finiteCodes(dtype: Fp8DType, negative: boolean): { code: number; value: number }[] {
  return CODES.filter((c) => (c & 0x80) === (negative ? 0x80 : 0))
    .map((code) => ({ code, value: referenceValue(dtype, code) }))
    .filter((e) => Number.isFinite(e.value))
    .sort((a, b) => Math.abs(a.value) - Math.abs(b.value));
}

/** The nearest finite code by search over all codes of x's sign (ties to the even code), saturating past the largest. */
function referenceCode(dtype: Fp8DType, x: number): number {
  if (Number.isNaN(x)) return dtype === 'fp8e4m3' ? 0x7f : 0x7e;
  const negative = x < 0 || Object.is(x, -0);
  let best = { code: -1, distance: Infinity };
  for (const { code, value } of finiteCodes(dtype, negative)) {
    const distance = Math.abs(Math.abs(x) - Math.abs(value));
    if (distance < best.distance || (distance === best.distance && (code & 1) === 0)) best = { code, distance };
  }
  return best.code;
}

describe('fp8 codec', () => {
  for (const dtype of DTYPES) {
    describe(dtype, () => {
      it('decodes every one of the 256 codes exactly', () => {
        for (const code of CODES) expect(Object.is(decodeFp8(dtype, code), referenceValue(dtype, code)) || (Number.isNaN(decodeFp8(dtype, code)) && Number.isNaN(referenceValue(dtype, code)))).toBe(true);
        const all = decodeFp8s(dtype, Uint8Array.from(CODES));
        for (const code of CODES) expect(Object.is(all[code], Math.fround(referenceValue(dtype, code))) || Number.isNaN(all[code]!)).toBe(true);
      });

      it('encodes every finite code back to itself, and the non-finite ones as the format says', () => {
        for (const code of CODES) {
          const value = referenceValue(dtype, code);
          const expected = Number.isNaN(value) ? (dtype === 'fp8e4m3' ? 0x7f : 0x7e) : Number.isFinite(value) ? code : (code & 0x80) | 0x7b;
          expect(encodeFp8(dtype, value), `code 0x${code.toString(16)}`).toBe(expected);
        }
      });

      it('rounds every midpoint between neighbours to the even code, and just off it to the nearer one', () => {
        for (const negative of [false, true]) {
          const codes = finiteCodes(dtype, negative);
          for (let i = 0; i + 1 < codes.length; i++) {
            const lo = codes[i]!;
            const hi = codes[i + 1]!;
            const mid = (lo.value + hi.value) / 2;
            const even = (lo.code & 1) === 0 ? lo.code : hi.code;
            expect(encodeFp8(dtype, mid), `midpoint ${mid}`).toBe(even);
            const step = Math.abs(hi.value - lo.value) * 2 ** -30;
            const sign = negative ? -1 : 1;
            expect(encodeFp8(dtype, mid - sign * step)).toBe(lo.code);
            expect(encodeFp8(dtype, mid + sign * step)).toBe(hi.code);
            expect(encodeFp8(dtype, mid)).toBe(referenceCode(dtype, mid));
          }
        }
      });

      it('matches the search reference on random values of every magnitude', () => {
        let seed = 12345;
        const random = () => {
          seed = (seed * 1103515245 + 12345) >>> 0;
          return seed / 2 ** 32;
        };
        for (let i = 0; i < 20000; i++) {
          const x = (random() < 0.5 ? -1 : 1) * 2 ** (random() * 40 - 24) * (1 + random());
          expect(encodeFp8(dtype, x), `x = ${x}`).toBe(referenceCode(dtype, x));
        }
      });

      it('saturates past the largest finite value, Infinity included; NaN stays NaN', () => {
        const max = fp8Max(dtype);
        expect(max).toBe(dtype === 'fp8e4m3' ? 448 : 57344);
        for (const x of [max, max * 1.01, max * 2, 1e30, Number.MAX_VALUE, Infinity]) {
          expect(encodeFp8(dtype, x)).toBe(dtype === 'fp8e4m3' ? 0x7e : 0x7b);
          expect(encodeFp8(dtype, -x)).toBe(dtype === 'fp8e4m3' ? 0xfe : 0xfb);
        }
        expect(Number.isNaN(roundToFp8(dtype, Number.NaN))).toBe(true);
        expect(encodeFp8(dtype, -Number.NaN)).toBe(dtype === 'fp8e4m3' ? 0x7f : 0x7e);
      });

      it('keeps subnormals and signed zeros', () => {
        const { fraction, bias } = FORMATS[dtype];
        const tiniest = 2 ** (1 - bias - fraction);
        expect(encodeFp8(dtype, tiniest)).toBe(1);
        expect(encodeFp8(dtype, -tiniest)).toBe(0x81);
        expect(encodeFp8(dtype, tiniest / 2)).toBe(0); // a tie with zero, which is even
        expect(encodeFp8(dtype, tiniest * 0.5000001)).toBe(1);
        expect(encodeFp8(dtype, 3 * tiniest)).toBe(3);
        expect(encodeFp8(dtype, 0)).toBe(0);
        expect(encodeFp8(dtype, -0)).toBe(0x80);
        expect(encodeFp8(dtype, -1e-300)).toBe(0x80);
        expect(Object.is(decodeFp8(dtype, 0x80), -0)).toBe(true);
      });

      it('encodes tensor data in bulk as the scalar form does', () => {
        const values = [0.1, -3.75, 1000, -1e6, Number.NaN, -0, 2 ** -12, 17.5];
        const out = new Uint8Array(values.length);
        encodeTensorData(dtype, values, out);
        expect([...out]).toEqual(values.map((v) => encodeFp8(dtype, v)));
        const bulk = new Uint8Array(values.length);
        encodeFp8s(dtype, Float32Array.from(values), bulk);
        expect([...bulk]).toEqual([...out]);
      });
    });
  }
});
