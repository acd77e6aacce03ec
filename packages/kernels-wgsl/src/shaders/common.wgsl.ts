/**
 * WGSL pieces every kernel shares: f16/bf16 conversions, index reads for i32
 * and i64 tensors, and the flattened workgroup id (the uniform block comes
 * from each kernel's declaration).
 */
import type { FloatDType, IndexDType } from '@kvkit/contracts';

/**
 * How a kernel converts f16: with integer operations (round-to-nearest-even,
 * subnormals and overflow as SEMANTICS.md has them, on any device), or with
 * `unpack2x16float` / `pack2x16float` where a probe of the device found them
 * to give the same bits (runtime/f16Conversion.ts).
 */
export interface F16Conversion {
  readonly decode: 'builtin' | 'integer';
  readonly encode: 'builtin' | 'integer';
}

export const INTEGER_F16: F16Conversion = { decode: 'integer', encode: 'integer' };

/** bf16 in the low 16 bits of a u32: a shift to decode, integer rounding to encode. */
const BF16_WGSL = /* wgsl */ `
fn bf16ToF32(h: u32) -> f32 { return bitcast<f32>((h & 0xffffu) << 16u); }
fn f32ToBf16(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select((b + 0x7fffu + ((b >> 16u) & 1u)) >> 16u, 0x7fc0u, (b & 0x7fffffffu) > 0x7f800000u);
}
`;

/**
 * The f16 functions of one conversion, their names ending in `suffix`:
 * `f16ToF32` (the low 16 bits of a u32), `f16PairToF32` (both halves of a
 * word, low first), `f32ToF16` (16 bits) and `f32PairToF16` (a word).
 *
 * Integer decoding: a subnormal f16 is an exact multiple of 2^-24, a normal
 * f32 (no flush-to-zero can touch it). Integer encoding: in the normal range,
 * rebias the exponent and round the 13 dropped bits to nearest even (a carry
 * may reach infinity, rightly); below 2^-14, adding 0.5 lines the value up on
 * f32's 2^-24 grid, rounded to nearest even by the adder itself.
 *
 * pack2x16float is defined on the finite f16 range only, so from 65504 up
 * (NaN too) it is given ±65504, and its 0x7bff then steps on to infinity from
 * 65520 up (+1) and to the quiet NaN 0x7e00 for NaN (+0x201), sign kept.
 */
export function f16Wgsl(conversion: F16Conversion, suffix = ''): string {
  const s = suffix;
  const decode =
    conversion.decode === 'builtin'
      ? `
fn f16ToF32${s}(h: u32) -> f32 { return unpack2x16float(h).x; }
fn f16PairToF32${s}(w: u32) -> vec2<f32> { return unpack2x16float(w); }`
      : `
fn f16ToF32${s}(h: u32) -> f32 {
  let sign = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 0x1fu;
  let normal = sign | (((h & 0x7fffu) + 0x1c000u) << 13u);
  let subnormal = sign | bitcast<u32>(f32(h & 0x3ffu) * 5.9604644775390625e-8);
  let special = sign | 0x7f800000u | ((h & 0x3ffu) << 13u);
  return bitcast<f32>(select(select(normal, special, e == 31u), subnormal, e == 0u));
}
fn f16PairToF32${s}(w: u32) -> vec2<f32> { return vec2(f16ToF32${s}(w), f16ToF32${s}(w >> 16u)); }`;
  const encode =
    conversion.encode === 'builtin'
      ? `
fn f32PairToF16${s}(v: vec2<f32>) -> u32 {
  let b = bitcast<vec2<u32>>(v);
  let a = b & vec2(0x7fffffffu);
  let packed = pack2x16float(bitcast<vec2<f32>>(select(b, (b & vec2(0x80000000u)) | vec2(0x477fe000u), a >= vec2(0x477fe000u))));
  let step = select(select(vec2(0u), vec2(1u), a >= vec2(0x477ff000u)), vec2(0x201u), a > vec2(0x7f800000u));
  return packed + step.x + (step.y << 16u);
}
fn f32ToF16${s}(x: f32) -> u32 { return f32PairToF16${s}(vec2(x, 0.0)); }`
      : `
fn f32ToF16${s}(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  let a = b & 0x7fffffffu;
  let normal = (a + 0xc8000fffu + ((a >> 13u) & 1u)) >> 13u;
  let subnormal = bitcast<u32>(bitcast<f32>(a) + 0.5) - 0x3f000000u;
  let special = select(0x7c00u, 0x7e00u, a > 0x7f800000u);
  return ((b >> 16u) & 0x8000u) | select(select(normal, subnormal, a < 0x38800000u), special, a >= 0x47800000u);
}
fn f32PairToF16${s}(v: vec2<f32>) -> u32 { return f32ToF16${s}(v.x) | (f32ToF16${s}(v.y) << 16u); }`;
  return decode + encode;
}

/** Decoding and round-to-nearest-even encoding of f16 and bf16 held in u32 words, f16 by `conversion`. */
export function halfFloatWgsl(conversion: F16Conversion): string {
  return BF16_WGSL + f16Wgsl(conversion);
}

/** Bytes per element of a float dtype as stored on the device. */
export function elementBytes(dtype: FloatDType): 4 | 2 {
  return dtype === 'f32' ? 4 : 2;
}

/** WGSL expression: the f32 value of the low 16 bits (`word`) of a half-float word. */
function halfToF32(dtype: FloatDType, bits: string): string {
  return dtype === 'f16' ? `f16ToF32(${bits})` : `bf16ToF32(${bits})`;
}

/**
 * WGSL expressions for the values held by one u32 word: one f32, or two
 * halves (low half first); an f16 word's two come from one pure pair decode,
 * so the compiler decodes the word once.
 */
export function wordValues(dtype: FloatDType, word: string): string[] {
  if (dtype === 'f32') return [`bitcast<f32>(${word})`];
  if (dtype === 'f16') return [`f16PairToF32(${word}).x`, `f16PairToF32(${word}).y`];
  return [`bf16ToF32(${word})`, `bf16ToF32(${word} >> 16u)`];
}

/** WGSL expression: the f32 bits of an element of a float dtype whose stored bits are `b` (a half's in the low 16 bits, the rest ignored). */
export function f32BitsOf(dtype: FloatDType, b: string): string {
  return dtype === 'f32' ? b : dtype === 'f16' ? `bitcast<u32>(f16ToF32(${b}))` : `(${b} << 16u)`;
}

/** WGSL expression: one u32 word holding `values` (one f32, or two values rounded to the half dtype). */
export function packWord(dtype: FloatDType, values: readonly string[]): string {
  if (dtype === 'f32') return `bitcast<u32>(${values[0]})`;
  if (dtype === 'f16') return `f32PairToF16(vec2<f32>(${values[0]}, ${values[1]}))`;
  return `(f32ToBf16(${values[0]}) | (f32ToBf16(${values[1]}) << 16u))`;
}

/** WGSL expression: the 16 rounded bits of one value in a half dtype. */
export function encodeHalf(dtype: 'f16' | 'bf16', value: string): string {
  return dtype === 'f16' ? `f32ToF16(${value})` : `f32ToBf16(${value})`;
}

/**
 * A WGSL function `name(i: u32) -> f32` reading element `i` of a float tensor
 * bound as `array<u32>` (f32 bits, or halves packed two per word).
 */
export function elementReader(name: string, array: string, dtype: FloatDType): string {
  if (dtype === 'f32') return `fn ${name}(i: u32) -> f32 { return bitcast<f32>(${array}[i]); }`;
  return `fn ${name}(i: u32) -> f32 { return ${halfToF32(dtype, `(${array}[i >> 1u] >> ((i & 1u) * 16u))`)}; }`;
}

/**
 * A WGSL function `name(i: u32) -> vec2<u32>` giving element `i` of an index
 * tensor as (low word, high word); an i32 is sign-extended, so both dtypes
 * answer the same range questions.
 */
export function indexReader(name: string, array: string, dtype: IndexDType): string {
  if (dtype === 'i64') return `fn ${name}(i: u32) -> vec2<u32> { return vec2<u32>(${array}[2u * i], ${array}[2u * i + 1u]); }`;
  return `fn ${name}(i: u32) -> vec2<u32> { let lo = ${array}[i]; return vec2<u32>(lo, select(0u, 0xffffffffu, (lo & 0x80000000u) != 0u)); }`;
}

/**
 * Range tests on an index given as (low word, high word): negative means the
 * high word's sign bit is set; a value in [0, below) needs a zero high word
 * (so an i64 past the i32 range is out of range like any other too-large value).
 */
export const INDEX_RANGE_WGSL = /* wgsl */ `
fn indexIsNegative(v: vec2<u32>) -> bool { return (v.y & 0x80000000u) != 0u; }
fn indexBelow(v: vec2<u32>, below: u32) -> bool { return v.y == 0u && v.x < below; }
`;

/**
 * Whether a call's value check (valueChecks.wgsl.ts, dispatched before the
 * call's writing kernels) raised the call's flag word: then the kernel
 * writes nothing.
 */
export const CALL_REJECTED = '(atomicLoad(&flags[params.callFlag]) != 0u)';

/** Entry point builtins and the workgroup's index in a 2-D dispatch that stands for a 1-D one. */
export const ENTRY_BUILTINS =
  '@builtin(workgroup_id) workgroupId: vec3<u32>, @builtin(num_workgroups) workgroupCount: vec3<u32>, @builtin(local_invocation_index) lane: u32';
export const LINEAR_WORKGROUP = 'let linearWorkgroup = workgroupId.y * workgroupCount.x + workgroupId.x;';
