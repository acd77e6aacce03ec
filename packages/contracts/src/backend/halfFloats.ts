/**
 * The host's f16 and bf16 codec, the one every backend and the conformance
 * suite use. Encoding rounds once, to nearest with ties to even, straight
 * from the source value, never through f32: an f32 from its bits, an f64 from
 * its high word (20 fraction bits, more than the 10 or 7 kept plus the round
 * bit) with the low word folded into its last bit as a sticky bit, which is
 * all the low word can decide. Overflow goes to ±Infinity, subnormals are exact,
 * signed zeros are kept, every NaN becomes the format's quiet NaN. Decoding is
 * exact, NaN payloads included. Bulk forms write into caller-given typed arrays
 * and allocate nothing per element.
 */
import { HI, LO } from './hostEndian.js';

export type HalfDType = 'f16' | 'bf16';

const F16_QUIET_NAN = 0x7e00;
const BF16_QUIET_NAN = 0x7fc0;

/** f16 bits of an f32 given as its bits. */
function f16OfF32(b: number): number {
  const a = b & 0x7fffffff;
  const sign = (b >>> 16) & 0x8000;
  // Rebias the exponent (127 to 15), drop 13 bits rounding to even; a carry moves to the next binade, or to Infinity.
  if (a >= 0x38800000) {
    if (a < 0x47800000) return sign | ((a - 0x38000000 + 0xfff + ((a >>> 13) & 1)) >>> 13);
    return a > 0x7f800000 ? F16_QUIET_NAN : sign | 0x7c00;
  }
  // Below 2^-14: the significand shifted onto the 2^-24 grid, rounded to even; 2^-25 and below round to zero.
  if (a <= 0x33000000) return sign;
  const significand = (a & 0x7fffff) | 0x800000;
  const shift = 126 - (a >>> 23);
  return sign | ((significand + (1 << (shift - 1)) - 1 + ((significand >>> shift) & 1)) >>> shift);
}

/** bf16 bits of an f32 given as its bits: its high half, rounded to even (subnormals and overflow fall out of the integer add). */
function bf16OfF32(b: number): number {
  if ((b & 0x7fffffff) > 0x7f800000) return BF16_QUIET_NAN;
  return (b + 0x7fff + ((b >>> 16) & 1)) >>> 16;
}

/** f16 bits of an f64 given as its high and low words. */
function f16OfF64(hi: number, lo: number): number {
  const a = (hi & 0x7fffffff) | (lo === 0 ? 0 : 1); // sticky: the low word only ever decides "above or below a tie"
  const sign = (hi >>> 16) & 0x8000;
  if (a >= 0x3f100000) {
    if (a < 0x40f00000) return sign | ((a - 0x3f000000 + 0x1ff + ((a >>> 10) & 1)) >>> 10); // rebias 1023 to 15, drop 10 bits
    return a > 0x7ff00000 ? F16_QUIET_NAN : sign | 0x7c00;
  }
  if (a <= 0x3e600000) return sign; // at most 2^-25
  const significand = (a & 0xfffff) | 0x100000;
  const shift = 1019 - (a >>> 20);
  return sign | ((significand + (1 << (shift - 1)) - 1 + ((significand >>> shift) & 1)) >>> shift);
}

/** bf16 bits of an f64 given as its high and low words. */
function bf16OfF64(hi: number, lo: number): number {
  const a = (hi & 0x7fffffff) | (lo === 0 ? 0 : 1);
  const sign = (hi >>> 16) & 0x8000;
  if (a >= 0x38100000) {
    if (a < 0x47f00000) return sign | ((a - 0x38000000 + 0xfff + ((a >>> 13) & 1)) >>> 13); // rebias 1023 to 127, drop 13 bits
    return a > 0x7ff00000 ? BF16_QUIET_NAN : sign | 0x7f80;
  }
  if (a <= 0x37900000) return sign; // at most 2^-134, half the smallest subnormal
  const significand = (a & 0xfffff) | 0x100000;
  const shift = 910 - (a >>> 20);
  return sign | ((significand + (1 << (shift - 1)) - 1 + ((significand >>> shift) & 1)) >>> shift);
}

const scalar = new Float64Array(1);
const scalarWords = new Uint32Array(scalar.buffer);
const scalarF32 = new Float32Array(1);
const scalarF32Bits = new Uint32Array(scalarF32.buffer);

/** The f16 bit pattern nearest to `x`, ties to even. */
export function encodeF16(x: number): number {
  scalar[0] = x;
  return f16OfF64(scalarWords[HI]!, scalarWords[LO]!);
}

/** The bf16 bit pattern nearest to `x`, ties to even. */
export function encodeBf16(x: number): number {
  scalar[0] = x;
  return bf16OfF64(scalarWords[HI]!, scalarWords[LO]!);
}

let f16Words: Int32Array | undefined;
let f16Floats: Float32Array | undefined;

/** The f32 bits of every f16 bit pattern, built on first use: decoding is one lookup. */
function f16Table(): Int32Array {
  if (f16Words) return f16Words;
  const words = new Int32Array(65536);
  const value = new Float32Array(1);
  const valueBits = new Uint32Array(value.buffer);
  for (let h = 0; h < 65536; h++) {
    const sign = (h & 0x8000) << 16;
    const exponent = (h >>> 10) & 0x1f;
    const fraction = h & 0x3ff;
    if (exponent === 0x1f) words[h] = sign | 0x7f800000 | (fraction << 13); // Infinity, or NaN with its payload
    else if (exponent > 0) words[h] = sign | ((exponent + 112) << 23) | (fraction << 13);
    else {
      value[0] = fraction * 2 ** -24; // subnormal: a normal f32
      words[h] = sign | valueBits[0]!;
    }
  }
  f16Words = words;
  f16Floats = new Float32Array(words.buffer);
  return words;
}

/** The value of an f16 bit pattern. */
export function decodeF16(h: number): number {
  f16Table();
  return f16Floats![h & 0xffff]!;
}

/** The value of a bf16 bit pattern: the high half of an f32. */
export function decodeBf16(h: number): number {
  scalarF32Bits[0] = (h & 0xffff) << 16;
  return scalarF32[0]!;
}

/** The f16 value nearest to `x` (ties to even): `Math.fround` for f16. */
export function roundToF16(x: number): number {
  return decodeF16(encodeF16(x));
}

/** The bf16 value nearest to `x` (ties to even): `Math.fround` for bf16. */
export function roundToBf16(x: number): number {
  return decodeBf16(encodeBf16(x));
}

const CHUNK = 4096;
const chunk = new Float64Array(CHUNK);
const chunkWords = new Int32Array(chunk.buffer);

/**
 * `out[i]` = the `dtype` bits of `source[i]` for every i < source.length,
 * rounded once from the source value. `out` may be a Uint16Array over
 * another buffer (WebGPU's packed words: element 2i is the low half on a
 * little-endian host, the only byte order WebGPU buffers have).
 */
export function encodeHalves(dtype: HalfDType, source: ArrayLike<number>, out: Uint16Array): void {
  const n = source.length;
  if (out.length < n) throw new RangeError(`encodeHalves: ${n} values into ${out.length} halves`);
  if (source instanceof Float32Array) encodeF32(dtype, new Int32Array(source.buffer, source.byteOffset, n), out, 0);
  else if (source instanceof Float64Array) encodeF64(dtype, new Int32Array(source.buffer, source.byteOffset, 2 * n), out, 0);
  else {
    // number[] and integer typed arrays: through an f64 chunk (exact for all of them), so one loop does the rounding.
    for (let start = 0; start < n; start += CHUNK) {
      const end = Math.min(start + CHUNK, n);
      if (ArrayBuffer.isView(source)) chunk.set((source as unknown as Int32Array).subarray(start, end));
      else for (let i = start; i < end; i++) chunk[i - start] = source[i]!;
      encodeF64(dtype, end - start === CHUNK ? chunkWords : chunkWords.subarray(0, 2 * (end - start)), out, start);
    }
  }
}

/** Whole 32-bit words of `out` from `at` on, so two halves go out in one store; none where they do not line up. */
function pairsOf(out: Uint16Array, at: number, count: number): Int32Array {
  const byteOffset = out.byteOffset + 2 * at;
  return new Int32Array(out.buffer, byteOffset - (byteOffset % 4), byteOffset % 4 === 0 ? count >>> 1 : 0);
}

// One loop per format and source, each calling one scalar form: V8 then inlines it (a loop shared by two would not).

function encodeF32(dtype: HalfDType, bits: Int32Array, out: Uint16Array, at: number): void {
  if (dtype === 'f16') f16sOfF32(bits, out, at);
  else bf16sOfF32(bits, out, at);
}

function f16sOfF32(bits: Int32Array, out: Uint16Array, at: number): void {
  const pairs = pairsOf(out, at, bits.length);
  for (let j = 0; j < pairs.length; j++) pairs[j] = f16OfF32(bits[2 * j]!) | (f16OfF32(bits[2 * j + 1]!) << 16);
  for (let i = 2 * pairs.length; i < bits.length; i++) out[at + i] = f16OfF32(bits[i]!);
}

function bf16sOfF32(bits: Int32Array, out: Uint16Array, at: number): void {
  const pairs = pairsOf(out, at, bits.length);
  for (let j = 0; j < pairs.length; j++) pairs[j] = bf16OfF32(bits[2 * j]!) | (bf16OfF32(bits[2 * j + 1]!) << 16);
  for (let i = 2 * pairs.length; i < bits.length; i++) out[at + i] = bf16OfF32(bits[i]!);
}

/** f64 values given as their 32-bit words. */
function encodeF64(dtype: HalfDType, words: Int32Array, out: Uint16Array, at: number): void {
  if (dtype === 'f16') f16sOfF64(words, out, at);
  else bf16sOfF64(words, out, at);
}

function f16sOfF64(w: Int32Array, out: Uint16Array, at: number): void {
  const pairs = pairsOf(out, at, w.length >>> 1);
  for (let j = 0; j < pairs.length; j++) pairs[j] = f16OfF64(w[4 * j + HI]!, w[4 * j + LO]!) | (f16OfF64(w[4 * j + 2 + HI]!, w[4 * j + 2 + LO]!) << 16);
  for (let i = 2 * pairs.length; i < w.length >>> 1; i++) out[at + i] = f16OfF64(w[2 * i + HI]!, w[2 * i + LO]!);
}

function bf16sOfF64(w: Int32Array, out: Uint16Array, at: number): void {
  const pairs = pairsOf(out, at, w.length >>> 1);
  for (let j = 0; j < pairs.length; j++) pairs[j] = bf16OfF64(w[4 * j + HI]!, w[4 * j + LO]!) | (bf16OfF64(w[4 * j + 2 + HI]!, w[4 * j + 2 + LO]!) << 16);
  for (let i = 2 * pairs.length; i < w.length >>> 1; i++) out[at + i] = bf16OfF64(w[2 * i + HI]!, w[2 * i + LO]!);
}

/** The exact f32 values of `bits` (f16 or bf16), into `out` (a new array if not given). */
export function decodeHalves(dtype: HalfDType, bits: Uint16Array, out: Float32Array = new Float32Array(bits.length)): Float32Array {
  const n = bits.length;
  if (out.length < n) throw new RangeError(`decodeHalves: ${n} halves into ${out.length} values`);
  const words = new Int32Array(out.buffer, out.byteOffset, n);
  // Two halves per 32-bit load where they line up.
  const pairs = new Int32Array(bits.buffer, bits.byteOffset - (bits.byteOffset % 4), bits.byteOffset % 4 === 0 ? n >>> 1 : 0);
  if (dtype === 'bf16') bf16ToF32Words(bits, pairs, words);
  else f16ToF32Words(bits, pairs, words, f16Table());
  return out;
}

function bf16ToF32Words(bits: Uint16Array, pairs: Int32Array, words: Int32Array): void {
  for (let j = 0; j < pairs.length; j++) {
    const w = pairs[j]!;
    words[2 * j] = w << 16;
    words[2 * j + 1] = w & -65536;
  }
  for (let i = 2 * pairs.length; i < bits.length; i++) words[i] = bits[i]! << 16;
}

function f16ToF32Words(bits: Uint16Array, pairs: Int32Array, words: Int32Array, table: Int32Array): void {
  for (let j = 0; j < pairs.length; j++) {
    const w = pairs[j]!;
    words[2 * j] = table[w & 0xffff]!;
    words[2 * j + 1] = table[w >>> 16]!;
  }
  for (let i = 2 * pairs.length; i < bits.length; i++) words[i] = table[bits[i]!]!;
}
