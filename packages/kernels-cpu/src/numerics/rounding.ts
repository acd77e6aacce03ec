/** A binary floating-point format: its fraction bits and normal exponent range (IEEE 754 terms). */
export interface FloatFormat {
  readonly fractionBits: number;
  readonly minExponent: number;
  readonly maxExponent: number;
}

export const F32_FORMAT: FloatFormat = { fractionBits: 23, minExponent: -126, maxExponent: 127 };
export const F16_FORMAT: FloatFormat = { fractionBits: 10, minExponent: -14, maxExponent: 15 };
export const BF16_FORMAT: FloatFormat = { fractionBits: 7, minExponent: -126, maxExponent: 127 };

const scratch = new Float64Array(1);
const scratchWords = new Uint32Array(scratch.buffer);
const HIGH_WORD = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1 ? 1 : 0;

/** floor(log2(a)) for a finite a > 0, read from the bits (Math.log2 can be off by one next to powers of two). */
export function exponentOf(a: number): number {
  scratch[0] = a;
  const biased = (scratchWords[HIGH_WORD]! >>> 20) & 0x7ff;
  // f64 subnormals lie far below every target format's smallest subnormal, so any exponent under it will do.
  return biased === 0 ? -1075 : biased - 1023;
}

/**
 * The value of `format` nearest to `x`, ties to even, rounded once straight
 * from the f64 value: subnormals kept, overflow to ±Infinity, NaN stays NaN,
 * the sign of zero kept.
 */
export function roundToFormat(x: number, format: FloatFormat): number {
  if (x === 0 || !Number.isFinite(x)) return x;
  const a = Math.abs(x);
  const m = format.fractionBits;
  // Halfway between the largest finite value and 2^(emax+1): from there up, RNE gives Infinity.
  if (a >= 2 ** format.maxExponent * (2 - 2 ** -(m + 1))) return x < 0 ? -Infinity : Infinity;
  const quantum = 2 ** (Math.max(exponentOf(a), format.minExponent) - m);
  const scaled = a / quantum; // exact: a power-of-two scale, and scaled < 2^(m+1)
  const floor = Math.floor(scaled);
  const rest = scaled - floor;
  const units = rest > 0.5 || (rest === 0.5 && floor % 2 === 1) ? floor + 1 : floor;
  const v = units * quantum;
  return x < 0 ? -v : v;
}
