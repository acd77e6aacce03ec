/**
 * Host-side f16 and bf16 encoding: every value is rounded once, to nearest
 * with ties to even, straight from the f64 it was given. The f64 is first
 * narrowed to f32 with round-to-odd (truncate, then set the last bit when
 * anything was dropped); f32 keeps 13 (f16) or 16 (bf16) more fraction bits
 * than the target, and round-to-odd then guarantees the second rounding gives
 * the same result as rounding the f64 directly.
 */

const scratch = new Float32Array(1);
const scratchBits = new Uint32Array(scratch.buffer);

export const F16_QUIET_NAN = 0x7e00;
export const BF16_QUIET_NAN = 0x7fc0;

/** f32 bits of `x` rounded to odd (NaN must be handled by the caller). */
function f32BitsRoundToOdd(x: number): number {
  scratch[0] = x;
  let bits = scratchBits[0]!;
  const rounded = scratch[0]!;
  if (rounded !== x) {
    // Rounding went away from zero: step back one unit in magnitude (Infinity steps back to the largest finite f32).
    if (Math.abs(rounded) > Math.abs(x)) bits = (bits - 1) >>> 0;
    bits = (bits | 1) >>> 0;
  }
  return bits;
}

/** bf16 bits of f32 bits, rounded to nearest even (NaN must be handled by the caller). */
export function bf16FromF32Bits(bits: number): number {
  return ((bits + 0x7fff + ((bits >>> 16) & 1)) >>> 16) & 0xffff;
}

/** f16 bits of f32 bits, rounded to nearest even, subnormals kept, overflow to infinity. */
export function f16FromF32Bits(bits: number): number {
  const sign = (bits >>> 16) & 0x8000;
  const biased = (bits >>> 23) & 0xff;
  const fraction = bits & 0x7fffff;
  if (biased === 0xff) return sign | (fraction !== 0 ? F16_QUIET_NAN : 0x7c00);
  const e = biased - 127;
  if (e > 15) return sign | 0x7c00;
  if (e >= -14) {
    let h = ((e + 15) << 10) | (fraction >>> 13);
    const rest = fraction & 0x1fff;
    // A carry out of the fraction moves to the next binade, or to infinity past 65504: both are right.
    if (rest > 0x1000 || (rest === 0x1000 && (h & 1) === 1)) h += 1;
    return sign | h;
  }
  if (biased === 0) return sign; // f32 subnormals lie far below half the smallest f16 subnormal
  // Subnormal f16: units of 2^-24; the f32 significand is (2^23 + fraction) * 2^(e - 23).
  const significand = 0x800000 | fraction;
  const shift = -(e + 1);
  if (shift > 24) return sign;
  let h = significand >>> shift;
  const rest = significand & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rest > half || (rest === half && (h & 1) === 1)) h += 1;
  return sign | h;
}

/** The f16 bit pattern nearest to `x` (ties to even), rounded once from the f64 value. */
export function encodeF16(x: number): number {
  if (Number.isNaN(x)) return F16_QUIET_NAN;
  return f16FromF32Bits(f32BitsRoundToOdd(x));
}

/** The bf16 bit pattern nearest to `x` (ties to even), rounded once from the f64 value. */
export function encodeBf16(x: number): number {
  if (Number.isNaN(x)) return BF16_QUIET_NAN;
  return bf16FromF32Bits(f32BitsRoundToOdd(x));
}

/** The value of an f16 bit pattern. */
export function decodeF16(h: number): number {
  const exponent = (h >>> 10) & 0x1f;
  const fraction = h & 0x3ff;
  let magnitude: number;
  if (exponent === 0) magnitude = fraction * 2 ** -24;
  else if (exponent === 31) magnitude = fraction === 0 ? Infinity : Number.NaN;
  else magnitude = (1024 + fraction) * 2 ** (exponent - 25);
  return h & 0x8000 ? -magnitude : magnitude;
}

/** The value of a bf16 bit pattern (the high half of an f32). */
export function decodeBf16(h: number): number {
  scratchBits[0] = (h & 0xffff) << 16;
  return scratch[0]!;
}

/** The value nearest to `x` among f16 values (ties to even): `Math.fround` for f16. */
export function roundToF16(x: number): number {
  return decodeF16(encodeF16(x));
}

/** The value nearest to `x` among bf16 values (ties to even): `Math.fround` for bf16. */
export function roundToBf16(x: number): number {
  return decodeBf16(encodeBf16(x));
}

let f16Table: Float32Array | undefined;

/** Value of every f16 bit pattern, for fast decoding of whole tensors. */
function f16Values(): Float32Array {
  if (!f16Table) f16Table = Float32Array.from({ length: 65536 }, (_, h) => decodeF16(h));
  return f16Table;
}

/** Packs `count` values two per u32 word (element 2i in the low half), rounded once each; the tail half of an odd count is 0. */
export function packHalves(dtype: 'f16' | 'bf16', values: ArrayLike<number>, count: number, into: Uint32Array): void {
  const encode = dtype === 'f16' ? encodeF16 : encodeBf16;
  const pairs = count >>> 1;
  for (let i = 0; i < pairs; i++) into[i] = (encode(values[2 * i]!) | (encode(values[2 * i + 1]!) << 16)) >>> 0;
  if (count & 1) into[pairs] = encode(values[count - 1]!);
}

/** The values of `count` packed halves, widened exactly to f32. */
export function unpackHalves(dtype: 'f16' | 'bf16', words: Uint32Array, count: number): Float32Array {
  const out = new Float32Array(count);
  if (dtype === 'bf16') {
    const outBits = new Uint32Array(out.buffer);
    for (let i = 0; i < count; i++) {
      const w = words[i >>> 1]!;
      outBits[i] = (i & 1 ? w >>> 16 : w & 0xffff) << 16;
    }
    return out;
  }
  const table = f16Values();
  for (let i = 0; i < count; i++) {
    const w = words[i >>> 1]!;
    out[i] = table[i & 1 ? w >>> 16 : w & 0xffff]!;
  }
  return out;
}
