/**
 * The host's fp8 codec, beside the f16/bf16 one and used the same way by
 * every backend and the conformance suite. Two formats: e4m3fn (4 exponent
 * bits, bias 7, no infinities, largest finite 448, NaN only at 0x7f/0xff)
 * and e5m2 (5 exponent bits, bias 15, IEEE-like with ±Infinity, largest
 * finite 57344). Encoding rounds once, straight from the given value, to the
 * nearest representable one with ties to even, and saturates: anything past
 * the largest finite value, ±Infinity included, becomes ±that value. NaN
 * becomes the format's canonical NaN (0x7f for e4m3, 0x7e for e5m2), signed
 * zeros and subnormals are kept. Decoding is exact.
 */
import type { Fp8DType } from '../tensor.js';
import { HI } from './hostEndian.js';

interface Fp8Format {
  /** Fraction (mantissa) bits. */
  readonly fraction: number;
  /** The exponent of the smallest normal value (1 - bias). */
  readonly minExponent: number;
  /** The code of the largest finite value. */
  readonly maxCode: number;
  readonly nan: number;
  /** Whether the all-ones exponent holds ±Infinity and NaNs (e5m2), or ordinary values up to 0x7e (e4m3fn). */
  readonly ieeeTop: boolean;
}

const FORMATS: Readonly<Record<Fp8DType, Fp8Format>> = {
  fp8e4m3: { fraction: 3, minExponent: -6, maxCode: 0x7e, nan: 0x7f, ieeeTop: false },
  fp8e5m2: { fraction: 2, minExponent: -14, maxCode: 0x7b, nan: 0x7e, ieeeTop: true },
};

/** The exact value of every code, built on first use: decoding is one lookup. */
const tables: Partial<Record<Fp8DType, Float32Array>> = {};

function tableOf(dtype: Fp8DType): Float32Array {
  const built = tables[dtype];
  if (built) return built;
  const { fraction, minExponent, ieeeTop } = FORMATS[dtype];
  const table = new Float32Array(256);
  const topExponent = (1 << (7 - fraction)) - 1;
  for (let code = 0; code < 256; code++) {
    const sign = code & 0x80 ? -1 : 1;
    const exponent = (code & 0x7f) >> fraction;
    const mantissa = code & ((1 << fraction) - 1);
    if (ieeeTop && exponent === topExponent) table[code] = mantissa === 0 ? sign * Infinity : Number.NaN;
    else if (!ieeeTop && (code & 0x7f) === 0x7f) table[code] = Number.NaN;
    else if (exponent === 0) table[code] = sign * mantissa * 2 ** (minExponent - fraction);
    else table[code] = sign * (1 + mantissa / (1 << fraction)) * 2 ** (exponent - 1 + minExponent);
  }
  tables[dtype] = table;
  return table;
}

const scalar = new Float64Array(1);
const scalarWords = new Uint32Array(scalar.buffer);

/** The fp8 code nearest to `x` (ties to even), saturating to ±the largest finite value; NaN to the canonical NaN. */
export function encodeFp8(dtype: Fp8DType, x: number): number {
  const f = FORMATS[dtype];
  if (Number.isNaN(x)) return f.nan;
  const sign = x < 0 || Object.is(x, -0) ? 0x80 : 0;
  const a = Math.abs(x);
  // floor(log2 a) from the f64 exponent field; f64 subnormals are far below every fp8 value and round to zero.
  scalar[0] = a;
  const exponent = Math.max(((scalarWords[HI]! >>> 20) & 0x7ff) - 1023, f.minExponent);
  // On the grid of this binade (2^(exponent - fraction)), a is `steps` steps from zero: exact, a power-of-two scaling.
  const steps = a * 2 ** (f.fraction - exponent);
  if (steps === Infinity) return sign | f.maxCode;
  let rounded = Math.floor(steps);
  const rest = steps - rounded;
  if (rest > 0.5 || (rest === 0.5 && (rounded & 1) === 1)) rounded += 1;
  // Codes count up with the value: the binade's first code plus the steps (a carry into the next binade falls out).
  const code = ((exponent - f.minExponent) << f.fraction) + rounded;
  return sign | Math.min(code, f.maxCode);
}

/** The value of an fp8 code. */
export function decodeFp8(dtype: Fp8DType, code: number): number {
  return tableOf(dtype)[code & 0xff]!;
}

/** The fp8 value nearest to `x`, saturated: `Math.fround` for fp8. */
export function roundToFp8(dtype: Fp8DType, x: number): number {
  return decodeFp8(dtype, encodeFp8(dtype, x));
}

/** The largest finite value of a format (448 for e4m3, 57344 for e5m2). */
export function fp8Max(dtype: Fp8DType): number {
  return decodeFp8(dtype, FORMATS[dtype].maxCode);
}

/** `out[i]` = the fp8 code of `source[i]` for every i < source.length. */
export function encodeFp8s(dtype: Fp8DType, source: ArrayLike<number>, out: Uint8Array): void {
  const n = source.length;
  if (out.length < n) throw new RangeError(`encodeFp8s: ${n} values into ${out.length} bytes`);
  for (let i = 0; i < n; i++) out[i] = encodeFp8(dtype, source[i]!);
}

/** The exact f32 values of fp8 `codes`, into `out` (a new array if not given). */
export function decodeFp8s(dtype: Fp8DType, codes: Uint8Array, out: Float32Array = new Float32Array(codes.length)): Float32Array {
  const n = codes.length;
  if (out.length < n) throw new RangeError(`decodeFp8s: ${n} codes into ${out.length} values`);
  const table = tableOf(dtype);
  for (let i = 0; i < n; i++) out[i] = table[codes[i]!]!;
  return out;
}
