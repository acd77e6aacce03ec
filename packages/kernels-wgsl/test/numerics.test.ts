import { decodeBf16, decodeF16, decodeFp8, encodeFp8, encodeHalves } from '@kvkit/contracts/backend';
import type { Fp8DType } from '@kvkit/contracts';
import { afterAll, describe, expect, it } from 'vitest';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { chooseF16Conversion } from '../src/runtime/f16Conversion.js';
import { INTEGER_F16 } from '../src/shaders/common.wgsl.js';
import { minifyWgslPiece } from '../scripts/wgslMinify.js';
import { FP8_WGSL, fp8Encode, fp8Quotient } from '../src/shaders/fp8.wgsl.js';
import type { F16Conversion } from '../src/shaders/common.wgsl.js';
import { runWordKernel } from './wordKernel.js';

// The host codec is tested in @kvkit/contracts; here, that the shaders' own conversions agree with it.

const probe = await findAdapter({}, KERNEL_TOGGLES);
const device = probe.ok ? await probe.adapter.requestDevice() : undefined;
afterAll(() => device?.destroy());
/** What the start-up probe makes of this device's f16 builtins. */
const chosen = device ? await chooseF16Conversion(device) : INTEGER_F16;
if (probe.ok) console.log(`kernels-wgsl: the f16 probe chose ${JSON.stringify(chosen)} on ${probe.description}`);
const BUILTIN_F16: F16Conversion = { decode: 'builtin', encode: 'builtin' };
/** A line of FP8_WGSL as the build ships it (minified, as this package's tests import it), for the tests that edit it. */
const shipped = (line: string) => minifyWgslPiece(line)!;

/** Runs `body` over `input` on the device, converting f16 as `f16` says, after `prelude` (wordKernel.ts). */
async function onDevice(body: string, input: Uint32Array, f16: F16Conversion = INTEGER_F16, prelude = ''): Promise<Uint32Array> {
  if (!device) throw new Error('no adapter');
  return runWordKernel(device, { body, input, f16, prelude });
}

function f32Bits(x: number): number {
  return new Uint32Array(Float32Array.of(x).buffer)[0]!;
}

/** Every 16-bit code twice: in the low half of a word, and (its complement's) in the high half. */
const ALL_CODES = Uint32Array.from({ length: 65536 }, (_, h) => (h | ((h ^ 0xffff) << 16)) >>> 0);

/** Where `f16`'s decoding (of the low half alone, and of both halves at once) differs from the host's. */
async function f16DecodeMismatches(f16: F16Conversion): Promise<string[]> {
  const [low, high, pair] = await Promise.all([
    onDevice('output[i] = bitcast<u32>(f16ToF32(input[i]));', ALL_CODES, f16),
    onDevice('output[i] = bitcast<u32>(f16ToF32(input[i] >> 16u));', ALL_CODES, f16),
    onDevice('let p = f16PairToF32(input[i]); output[i] = select(0u, 1u, bitcast<u32>(p.x) != bitcast<u32>(f16ToF32(input[i]))) | select(0u, 2u, bitcast<u32>(p.y) != bitcast<u32>(f16ToF32(input[i] >> 16u)));', ALL_CODES, f16),
  ]);
  const decodes = (h: number, got: number) => (Number.isNaN(decodeF16(h)) ? (got & 0x7fffffff) > 0x7f800000 : got === f32Bits(decodeF16(h)));
  const bad: string[] = [];
  for (let h = 0; h < 65536; h++) {
    if (!decodes(h, low[h]!) || !decodes(h ^ 0xffff, high[h]!)) bad.push(`f16 0x${h.toString(16)}`);
    // The pair gives the single decode's bits (a NaN code's payload may differ between the two).
    if (pair[h] !== 0 && !Number.isNaN(decodeF16(h)) && !Number.isNaN(decodeF16(h ^ 0xffff))) bad.push(`f16 pair 0x${h.toString(16)}`);
  }
  return bad;
}

/** Finite f32 patterns, both signs: every f16 code's value and its upper midpoint with the f32 on either side, dense runs, ties, random ones. */
const ENCODE_PATTERNS = (() => {
  const patterns: number[] = [];
  for (let h = 0; h < 0x7c00; h++) {
    const value = f32Bits(decodeF16(h));
    const mid = h < 0x400 ? f32Bits((2 * h + 1) * 2 ** -25) : value + 0x1000;
    patterns.push(value, mid - 1, mid, mid + 1);
  }
  for (let b = 0x33000000; b <= 0x33800000; b += 0x1001) patterns.push(b); // around half the smallest f16 subnormal
  for (let b = 0x38000000; b <= 0x39000000; b += 0x801) patterns.push(b); // subnormal/normal f16 boundary
  for (let b = 0x477f0000; b <= 0x47800000; b += 0x11) patterns.push(b); // the top of the f16 range
  for (let b = 0x47800000; b < 0x7f800000; b += 0x1234567) patterns.push(b); // past it, up to the largest f32
  for (let b = 1; b < 0x800000; b += 0x12345) patterns.push(b); // f32 subnormals
  for (const base of [0x3f800000, 0x40490000, 0x3c000000]) {
    patterns.push(base | 0x1000, base | 0x3000, base | 0x1001, base | 0x8000, base | 0x18000, base | 0x7fff);
  }
  let x = 12345;
  for (let i = 0; i < 100000; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    if (((x >>> 23) & 0xff) !== 0xff) patterns.push(x >>> 0);
  }
  patterns.push(0x7f800000); // infinity
  return Uint32Array.from([...patterns, ...patterns.map((p) => p ^ 0x80000000)], (p) => p >>> 0);
})();

/** A device may flush f32 subnormal inputs to zero: both answers are then the signed zero, unless `strict`. */
function roundsAsHost(bits: number, got: number, want: number, strict = false): boolean {
  return got === want || (!strict && (bits & 0x7f800000) === 0 && (got & 0x7fff) === 0);
}

/** Where `f16`'s encoding (one value, and two into one word) of ENCODE_PATTERNS differs from the host's. */
async function f16EncodeMismatches(f16: F16Conversion, strict = false): Promise<string[]> {
  const [single, pair] = await Promise.all([
    onDevice('output[i] = f32ToF16(bitcast<f32>(input[i]));', ENCODE_PATTERNS, f16),
    onDevice('output[i] = f32PairToF16(vec2<f32>(bitcast<f32>(input[i]), bitcast<f32>(input[arrayLength(&input) - 1u - i])));', ENCODE_PATTERNS, f16),
  ]);
  const host = new Uint16Array(ENCODE_PATTERNS.length);
  encodeHalves('f16', new Float32Array(ENCODE_PATTERNS.buffer), host);
  const n = ENCODE_PATTERNS.length;
  const bad: string[] = [];
  ENCODE_PATTERNS.forEach((bits, i) => {
    const mirror = n - 1 - i;
    const ok =
      roundsAsHost(bits, single[i]!, host[i]!, strict) && roundsAsHost(bits, pair[i]! & 0xffff, host[i]!, strict) && roundsAsHost(ENCODE_PATTERNS[mirror]!, pair[i]! >>> 16, host[mirror]!, strict);
    if (!ok) bad.push(`f16(0x${bits.toString(16)}) = 0x${single[i]!.toString(16)}, want 0x${host[i]!.toString(16)}`);
  });
  return bad;
}

/** x / s rounded once to f32, as fp8 pools quantise it; quotients below the normal range as signed zero (fp8 rounds them to zero too). */
function hostQuotientBits(x: number, s: number): number {
  const [fx, fs] = new Float32Array(new Uint32Array([x, s]).buffer);
  const q = Math.fround(fx! / fs!);
  if (Number.isNaN(q)) return 0x7fc00000;
  if (q !== 0 && Math.abs(q) < 2 ** -126) return (x ^ s) & 0x80000000 ? 0x80000000 : 0;
  return f32Bits(q);
}

/** A 32-bit xorshift generator from `seed`: the same pairs every run. */
function xorshift(seed: number): () => number {
  let state = seed;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
}

/** Pairs (x, s) of f32 bits: exact quotients (small integers times powers of two), random ones of every binade, subnormal operands. */
const QUOTIENT_PAIRS = (() => {
  const pairs: number[] = [];
  const next = xorshift(0x2545f491);
  for (let a = 1; a < 64; a++) for (let b = 1; b < 64; b++) pairs.push(f32Bits(a * b * 2 ** ((a % 7) - 3)), f32Bits(b * 2 ** ((b % 5) - 60)));
  for (let i = 0; i < 20000; i++) pairs.push(next() & 0xbfffffff, (next() & 0x3fffffff) | 0x00800000);
  for (let i = 0; i < 4000; i++) pairs.push(next() & 0x807fffff, next() & 0x3fffffff);
  for (let i = 0; i < 4000; i++) pairs.push(next() & 0x3fffffff, next() & 0x007fffff);
  // Significands one step either side of a multiple of the divisor's.
  for (let i = 0; i < 4000; i++) {
    const s = 0x3f800000 | (next() & 0x7fffff);
    const exact = Math.fround(new Float32Array(new Uint32Array([s]).buffer)[0]! * ((next() % 255) + 1));
    pairs.push(f32Bits(exact) + (i % 3) - 1, s);
  }
  return Uint32Array.from(pairs);
})();

/**
 * Pairs (x, s) of f32 bits whose quotient lies on or a few units either side
 * of a rounding boundary of `dtype` (the midpoint of two neighbouring codes,
 * either sign), over divisors of many binades; then random pairs.
 */
function fp8BoundaryPairs(dtype: Fp8DType): Uint32Array {
  const pairs: number[] = [];
  const next = xorshift(0x1d872b41);
  const max = dtype === 'fp8e4m3' ? 0x7e : 0x7b;
  for (let code = 0; code < max; code++) {
    const midpoint = (decodeFp8(dtype, code) + decodeFp8(dtype, code + 1)) / 2;
    for (let k = 0; k < 24; k++) {
      const s = ((next() % 200) + 27) << 23 | (next() & 0x7fffff);
      const x = f32Bits(Math.fround(midpoint * new Float32Array(new Uint32Array([s]).buffer)[0]!)) + (k % 7) - 3;
      pairs.push(k % 2 ? (x | 0x80000000) >>> 0 : x, s);
    }
  }
  for (let i = 0; i < 8000; i++) pairs.push(next() & 0xbfffffff, (next() & 0x3fffffff) | 0x00800000);
  return Uint32Array.from(pairs);
}

/** The fp8 codes the host gives x / s of each pair (x at even indices, s after it), at the pair's even index. */
function hostFp8Quotients(dtype: Fp8DType, pairs: Uint32Array): Uint32Array {
  const out = new Uint32Array(pairs.length);
  for (let i = 0; i < pairs.length; i += 2) out[i] = encodeFp8(dtype, new Float32Array(new Uint32Array([hostQuotientBits(pairs[i]!, pairs[i + 1]!)]).buffer)[0]!);
  return out;
}

describe.skipIf(!probe.ok)(`device conversions (WGSL) agree with the host${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('divides x by an fp8 pool scale rounded once to f32, exact quotients and neighbours included', async () => {
    const got = await onDevice('if (i % 2u == 0u) { output[i] = quotientBits(input[i], input[i + 1u]); }', QUOTIENT_PAIRS, INTEGER_F16, FP8_WGSL);
    const bad: string[] = [];
    for (let i = 0; i < QUOTIENT_PAIRS.length; i += 2) {
      const want = hostQuotientBits(QUOTIENT_PAIRS[i]!, QUOTIENT_PAIRS[i + 1]!);
      if (got[i] !== want) bad.push(`0x${QUOTIENT_PAIRS[i]!.toString(16)} / 0x${QUOTIENT_PAIRS[i + 1]!.toString(16)}: 0x${got[i]!.toString(16)}, want 0x${want.toString(16)}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  it('corrects a seed quotient a dozen units off either way to the same exact bits', async () => {
    // The f32 quotient that seeds the division is within 2.5 ulp (12 units of the 26-bit quotient); force it off by as much.
    const seed = shipped('var q = u32(f32(mx) / f32(ms) * 33554432.0);');
    expect(FP8_WGSL).toContain(seed);
    const exact = await onDevice('if (i % 2u == 0u) { output[i] = quotientBits(input[i], input[i + 1u]); }', QUOTIENT_PAIRS, INTEGER_F16, FP8_WGSL);
    for (const off of ['+ 12u', '- 12u', '+ 1u', '- 1u']) {
      const prelude = FP8_WGSL.replace(seed, `var q = u32(f32(mx) / f32(ms) * 33554432.0) ${off};`);
      const got = await onDevice('if (i % 2u == 0u) { output[i] = quotientBits(input[i], input[i + 1u]); }', QUOTIENT_PAIRS, INTEGER_F16, prelude);
      const differing = got.filter((w, i) => i % 2 === 0 && w !== exact[i]).length;
      expect(differing, `seed ${off}`).toBe(0);
    }
  });

  it('rounds f32 to fp8 as the host codec does: a spread of every binade, and every tie with its neighbours', async () => {
    for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
      const patterns: number[] = [];
      for (let b = 0; b < 2 ** 32; b += 4099) patterns.push(b);
      const max = dtype === 'fp8e4m3' ? 0x7e : 0x7b;
      for (let code = 0; code < max + 2; code++) {
        const tie = f32Bits((decodeFp8(dtype, code) + (code < max ? decodeFp8(dtype, code + 1) : 2 * decodeFp8(dtype, max) - decodeFp8(dtype, max - 1))) / 2);
        for (let k = -3; k <= 3; k++) patterns.push(tie + k, (tie + k + 0x80000000) >>> 0);
      }
      const input = Uint32Array.from(patterns);
      const got = await onDevice(`output[i] = ${fp8Encode(dtype, 'input[i]')};`, input, INTEGER_F16, FP8_WGSL);
      const values = new Float32Array(input.buffer);
      const bad: string[] = [];
      input.forEach((bits, i) => {
        const want = encodeFp8(dtype, values[i]!);
        if (got[i] !== want) bad.push(`${dtype}(0x${bits.toString(16)}) = 0x${got[i]!.toString(16)}, want 0x${want.toString(16)}`);
      });
      expect(bad.slice(0, 5), dtype).toEqual([]);
    }
  });

  it('rounds x / s to fp8 as the host does, at every rounding boundary, with x times the inverse scale off by as much as WGSL allows', async () => {
    // x times f32's inverse of s may be 3 * 2^-23 off relatively: 7 units of the quotient's bits where the exact one is a
    // binade lower. Forced 7 off, the codes stay exact; with no slack around the product, they do not (so the test sees
    // the slack at work).
    const product = shipped('bitcast<f32>(ax) * inverse');
    expect(FP8_WGSL).toContain(product);
    const slack = shipped('const QUOTIENT_SLACK = 8u;');
    expect(FP8_WGSL).toContain(slack);
    for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
      const pairs = fp8BoundaryPairs(dtype);
      const want = hostFp8Quotients(dtype, pairs);
      const body = `if (i % 2u == 0u) { output[i] = ${fp8Quotient(dtype, 'input[i]', 'input[i + 1u]')}; }`;
      const mismatches = async (prelude: string) => {
        const got = await onDevice(body, pairs, INTEGER_F16, prelude);
        const bad: string[] = [];
        for (let i = 0; i < pairs.length; i += 2) if (got[i] !== want[i]) bad.push(`0x${pairs[i]!.toString(16)} / 0x${pairs[i + 1]!.toString(16)}: 0x${got[i]!.toString(16)}, want 0x${want[i]!.toString(16)}`);
        return bad;
      };
      expect((await mismatches(FP8_WGSL)).slice(0, 5), dtype).toEqual([]);
      for (const off of ['+ 7u', '- 7u']) {
        const forced = FP8_WGSL.replace(product, `bitcast<f32>(bitcast<u32>(${product}) ${off})`);
        expect((await mismatches(forced)).slice(0, 5), `${dtype}, quotient ${off}`).toEqual([]);
        expect((await mismatches(forced.replace(slack, 'const QUOTIENT_SLACK = 0u;'))).length, `${dtype}, quotient ${off}, no slack`).toBeGreaterThan(0);
      }
    }
  });

  it('decodes every f16 and bf16 bit pattern exactly', async () => {
    const all = Uint32Array.from({ length: 65536 }, (_, h) => h);
    const bf16 = await onDevice('output[i] = bitcast<u32>(bf16ToF32(input[i]));', all);
    const bad = await f16DecodeMismatches(INTEGER_F16);
    for (let h = 0; h < 65536; h++) {
      const wantBf16 = decodeBf16(h);
      if (Number.isNaN(wantBf16) ? (bf16[h]! & 0x7fffffff) <= 0x7f800000 : bf16[h] !== f32Bits(wantBf16)) bad.push(`bf16 0x${h.toString(16)}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  it('rounds f32 to f16 and bf16 to nearest even, subnormals and overflow included', async () => {
    const bad = await f16EncodeMismatches(INTEGER_F16);
    const bf16 = await onDevice('output[i] = f32ToBf16(bitcast<f32>(input[i]));', ENCODE_PATTERNS);
    const hostBf16 = new Uint16Array(ENCODE_PATTERNS.length);
    encodeHalves('bf16', new Float32Array(ENCODE_PATTERNS.buffer), hostBf16);
    ENCODE_PATTERNS.forEach((bits, i) => {
      if (!roundsAsHost(bits, bf16[i]!, hostBf16[i]!)) bad.push(`bf16(0x${bits.toString(16)}) = 0x${bf16[i]!.toString(16)}, want 0x${hostBf16[i]!.toString(16)}`);
    });
    expect(bad.slice(0, 10)).toEqual([]);
  });

  // The probe runs on the device alone; here the host codec judges the builtins on the same classes of input and more.
  it('the start-up probe takes unpack2x16float exactly where it decodes every code as the host does', async () => {
    const bad = await f16DecodeMismatches(BUILTIN_F16);
    expect({ decode: chosen.decode, mismatches: bad.slice(0, 3) }).toEqual({ decode: bad.length === 0 ? 'builtin' : 'integer', mismatches: bad.slice(0, 3) });
  });

  it('the start-up probe takes pack2x16float (behind its range guard) only where it rounds as the host does, and refuses it only where it does not', async () => {
    // The probe compares with the integer code bit for bit, so a zero of the other sign for an f32 subnormal refuses it too.
    const [lenient, strict] = await Promise.all([f16EncodeMismatches(BUILTIN_F16), f16EncodeMismatches(BUILTIN_F16, true)]);
    console.log(`kernels-wgsl: pack2x16float behind its guard: ${strict.length} of ${ENCODE_PATTERNS.length} patterns differ from the host${strict.length ? `, e.g. ${strict.slice(0, 2).join('; ')}` : ''}`);
    if (chosen.encode === 'builtin') expect(lenient.slice(0, 3)).toEqual([]);
    else expect(strict.length).toBeGreaterThan(0);
  });
});
