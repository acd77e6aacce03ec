import { BF16_FORMAT, exponentOf, F16_FORMAT, roundToFormat } from './rounding.js';

/** The f16 value nearest to `x` (ties to even), as a number: the f16 analogue of `Math.fround`. */
export function roundToF16(x: number): number {
  return roundToFormat(x, F16_FORMAT);
}

/** The bf16 value nearest to `x` (ties to even), as a number: rounded once from the f64 value, never through f32. */
export function roundToBf16(x: number): number {
  return roundToFormat(x, BF16_FORMAT);
}

const F16_NAN = 0x7e00;
const BF16_NAN = 0x7fc0;

/** The f16 bit pattern of `x`, rounded once to nearest even. */
export function encodeF16(x: number): number {
  const v = roundToF16(x);
  if (Number.isNaN(v)) return F16_NAN;
  const sign = v < 0 || Object.is(v, -0) ? 0x8000 : 0;
  const a = Math.abs(v);
  if (a === Infinity) return sign | 0x7c00;
  if (a < 2 ** -14) return sign | (a * 2 ** 24); // subnormal or zero: an exact multiple of 2^-24
  const e = exponentOf(a);
  return sign | ((e + 15) << 10) | (a * 2 ** (10 - e) - 1024);
}

const f32Scratch = new Float32Array(1);
const f32Bits = new Uint32Array(f32Scratch.buffer);

/** The bf16 bit pattern of `x`, rounded once to nearest even. */
export function encodeBf16(x: number): number {
  const v = roundToBf16(x);
  if (Number.isNaN(v)) return BF16_NAN;
  f32Scratch[0] = v; // exact: every bf16 value is an f32 value
  return f32Bits[0]! >>> 16;
}

let f16Table: Float32Array | undefined;
let bf16Table: Float32Array | undefined;

/** Value of every f16 bit pattern; built on first use. */
export function f16Values(): Float32Array {
  if (f16Table) return f16Table;
  const table = new Float32Array(65536);
  for (let b = 0; b < 65536; b++) {
    const exponent = (b >>> 10) & 0x1f;
    const fraction = b & 0x3ff;
    let a: number;
    if (exponent === 0) a = fraction * 2 ** -24;
    else if (exponent === 31) a = fraction === 0 ? Infinity : Number.NaN;
    else a = (1024 + fraction) * 2 ** (exponent - 25);
    table[b] = b & 0x8000 ? -a : a;
  }
  f16Table = table;
  return table;
}

/** Value of every bf16 bit pattern (the high half of an f32); built on first use. */
export function bf16Values(): Float32Array {
  if (bf16Table) return bf16Table;
  const words = new Uint32Array(65536);
  for (let b = 0; b < 65536; b++) words[b] = b << 16;
  bf16Table = new Float32Array(words.buffer);
  return bf16Table;
}
