/**
 * f16 and bf16 on the host: bit patterns rounded once from the f64 value
 * (round to nearest, ties to even; never through f32, so no double rounding),
 * and the exact f32 value of every pattern for read().
 */

/** x rounded to an integer, ties to even; for 0 <= x < 2^52 (so `x - floor` is exact). */
function roundHalfEven(x: number): number {
  const floor = Math.floor(x);
  const rest = x - floor;
  if (rest > 0.5) return floor + 1;
  if (rest < 0.5) return floor;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** floor(log2(a)) for finite a > 0, corrected where Math.log2 rounds across a power of two. */
function binaryExponent(a: number): number {
  let e = Math.floor(Math.log2(a));
  if (2 ** e > a) e -= 1;
  else if (2 ** (e + 1) <= a) e += 1;
  return e;
}

/** A binary16-like format: `fractionBits` stored fraction bits, exponent bias, smallest normal exponent. */
interface HalfFormat {
  readonly fractionBits: number;
  readonly bias: number;
  readonly minExponent: number;
  /** Magnitudes at or above this round to infinity (halfway between the largest finite value and 2^(emax+1)). */
  readonly overflow: number;
  readonly infinity: number;
  readonly nan: number;
}

const F16: HalfFormat = { fractionBits: 10, bias: 15, minExponent: -14, overflow: 65520, infinity: 0x7c00, nan: 0x7e00 };
const BF16: HalfFormat = { fractionBits: 7, bias: 127, minExponent: -126, overflow: (2 - 2 ** -8) * 2 ** 127, infinity: 0x7f80, nan: 0x7fc0 };

function encode(x: number, f: HalfFormat): number {
  if (Number.isNaN(x)) return f.nan;
  const sign = x < 0 || Object.is(x, -0) ? 0x8000 : 0;
  const a = Math.abs(x);
  if (a >= f.overflow) return sign | f.infinity;
  if (a === 0) return sign;
  const m = f.fractionBits;
  if (a < 2 ** f.minExponent) {
    // Subnormal: a whole number of the smallest step; a carry into 2^m lands on the smallest normal.
    return sign | roundHalfEven(a * 2 ** (m - f.minExponent));
  }
  const e = binaryExponent(a);
  const fraction = roundHalfEven((a / 2 ** e - 1) * 2 ** m);
  // A fraction that rounds up to 2^m carries into the exponent: adding the bits does exactly that.
  return sign | (((e + f.bias) << m) + fraction);
}

/** The f16 bit pattern nearest to x. */
export function encodeF16(x: number): number {
  return encode(x, F16);
}

/** The bf16 bit pattern nearest to x. */
export function encodeBf16(x: number): number {
  return encode(x, BF16);
}

let f16Values: Float32Array | undefined;

/** The value of every f16 bit pattern (built on first use). */
export function f16Table(): Float32Array {
  if (f16Values) return f16Values;
  const table = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const exponent = (bits >> 10) & 31;
    const fraction = bits & 1023;
    const magnitude = exponent === 31 ? (fraction === 0 ? Infinity : Number.NaN) : exponent === 0 ? fraction * 2 ** -24 : (1 + fraction / 1024) * 2 ** (exponent - 15);
    table[bits] = bits & 0x8000 ? -magnitude : magnitude;
  }
  f16Values = table;
  return table;
}

/** Widens f16 or bf16 bit patterns to f32, exactly. */
export function decodeHalves(dtype: 'f16' | 'bf16', bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  if (dtype === 'bf16') {
    // A bf16 is the high half of an f32.
    const words = new Uint32Array(out.buffer);
    for (let i = 0; i < bits.length; i++) words[i] = bits[i]! << 16;
    return out;
  }
  const table = f16Table();
  for (let i = 0; i < bits.length; i++) out[i] = table[bits[i]!]!;
  return out;
}
