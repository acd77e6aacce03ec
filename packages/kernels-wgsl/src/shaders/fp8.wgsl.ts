/**
 * fp8 in WGSL (no native fp8): the code of x / scale as the host codec
 * (contracts/src/backend/fp8.ts) defines it, the f32 quotient rounded once,
 * then to fp8 (nearest, ties to even, saturating, NaN to the canonical NaN),
 * and the exact decoding. f32 arithmetic there may flush subnormals and
 * divides to 2.5 ulp, so x times an f32 inverse of the scale is taken only
 * where its error cannot change the code, and an exact division with
 * integer operations elsewhere.
 */
import type { Fp8DType } from '@kvkit/contracts';

/** Per format: fraction bits, smallest normal exponent, largest finite code, canonical NaN. */
const FORMAT: Readonly<Record<Fp8DType, { fraction: number; minExponent: number; maxCode: number; nan: number }>> = {
  fp8e4m3: { fraction: 3, minExponent: -6, maxCode: 0x7e, nan: 0x7f },
  fp8e5m2: { fraction: 2, minExponent: -14, maxCode: 0x7b, nan: 0x7e },
};

export const FP8_WGSL = /* wgsl */ `
// The bits of x / s rounded once to f32 (nearest even), from the significands' exact quotient and remainder.
// Quotients below the normal f32 range come out as signed zero: every fp8 format rounds them to zero too.
fn quotientBits(x: u32, s: u32) -> u32 {
  let sign = (x ^ s) & 0x80000000u;
  let ax = x & 0x7fffffffu;
  let as_ = s & 0x7fffffffu;
  if (ax > 0x7f800000u || as_ > 0x7f800000u) { return 0x7fc00000u; }
  if (ax == 0x7f800000u) { return select(sign | 0x7f800000u, 0x7fc00000u, as_ == 0x7f800000u); }
  if (as_ == 0x7f800000u) { return sign; }
  if (as_ == 0u) { return select(sign | 0x7f800000u, 0x7fc00000u, ax == 0u); }
  if (ax == 0u) { return sign; }
  var mx = ax & 0x7fffffu;
  var ex = i32(ax >> 23u);
  if (ex == 0) { let z = countLeadingZeros(mx) - 8u; mx = mx << z; ex = 1 - i32(z); } else { mx = mx | 0x800000u; }
  var ms = as_ & 0x7fffffu;
  var es = i32(as_ >> 23u);
  if (es == 0) { let z = countLeadingZeros(ms) - 8u; ms = ms << z; es = 1 - i32(z); } else { ms = ms | 0x800000u; }
  var e = ex - es;
  if (mx < ms) { mx = mx << 1u; e = e - 1; }
  // q = floor(mx * 2^25 / ms), 26 bits: f32's quotient of the two significands (WGSL bounds its error
  // by 2.5 ulp for these operands, a dozen units of q) made exact with the remainder, which then fits
  // in 32 signed bits, so wrapping u32 products give it exactly.
  var q = u32(f32(mx) / f32(ms) * 33554432.0);
  var r = bitcast<i32>((mx << 25u) - q * ms);
  loop { if (r >= 0) { break; } r = r + i32(ms); q = q - 1u; }
  loop { if (r < i32(ms)) { break; } r = r - i32(ms); q = q + 1u; }
  var m = q >> 2u;
  let guard = (q >> 1u) & 1u;
  let rest = (q & 1u) | select(0u, 1u, r != 0);
  if (guard == 1u && (rest == 1u || (m & 1u) == 1u)) { m = m + 1u; }
  if (m == 0x1000000u) { m = 0x800000u; e = e + 1; }
  let biased = e + 127;
  if (biased >= 255) { return sign | 0x7f800000u; }
  if (biased <= 0) { return sign; }
  return sign | (u32(biased) << 23u) | (m & 0x7fffffu);
}

// The fp8 code of f32 bits b: nearest, ties to even, saturating, NaN to the canonical NaN.
fn fp8OfBits(b: u32, fraction: u32, minExponent: i32, maxCode: u32, nan: u32) -> u32 {
  let a = b & 0x7fffffffu;
  if (a > 0x7f800000u) { return nan; }
  return ((b >> 24u) & 0x80u) | min(fp8Magnitude(a, fraction, minExponent), maxCode);
}

// The code of magnitude bits a (not NaN) before saturation. From fp8's smallest normal value up, fp8's
// codes are f32's bits rounded to a multiple of 2^(23 - fraction) (a carry moves to the next binade);
// below it the steps are 2^(minExponent - fraction), and a times their inverse is exact.
fn fp8Magnitude(a: u32, fraction: u32, minExponent: i32) -> u32 {
  let smallestNormal = u32(127 + minExponent) << 23u;
  if (a < smallestNormal) { return u32(round(bitcast<f32>(a) * exp2(f32(i32(fraction) - minExponent)))); }
  let shift = 23u - fraction;
  let biased = a - smallestNormal + (1u << 23u);
  return (biased + (1u << (shift - 1u)) - 1u + ((biased >> shift) & 1u)) >> shift;
}

// The fp8 code of x / s (f32 bits), rounded once to f32 as quotientBits rounds it; inverse is 1 / |s| in f32.
// Where x is finite and normal (or zero) and |s| in [2^-126, 2^126], x * inverse is within 3 * 2^-23 of
// x / s relatively (WGSL's 2.5 ulp division, then a correctly rounded product), so within 7 units of the
// f32 quotient's bits, even across a binade. When no rounding boundary of fp8 lies within QUOTIENT_SLACK
// units of the product's bits, its code is the code. Boundaries are ties: in the normal range, bits whose
// remainder below the code is exactly half a step; below it (and in the first normal binade, whose steps
// are the same), where both ends of the span round apart. Products that close to one (about one in
// 65 000 for e4m3) take the exact division.
const QUOTIENT_SLACK = 8u;
fn fp8OfQuotient(x: u32, s: u32, inverse: f32, fraction: u32, minExponent: i32, maxCode: u32, nan: u32) -> u32 {
  let ax = x & 0x7fffffffu;
  let as_ = s & 0x7fffffffu;
  if (ax < 0x7f800000u && (ax >= 0x00800000u || ax == 0u) && as_ >= 0x00800000u && as_ <= 0x7e800000u) {
    let aq = bitcast<u32>(bitcast<f32>(ax) * inverse);
    let sign = ((x ^ s) >> 24u) & 0x80u;
    let smallestNormal = u32(127 + minExponent) << 23u;
    if (aq >= smallestNormal + QUOTIENT_SLACK) {
      let shift = 23u - fraction;
      let rest = (aq - smallestNormal) & ((1u << shift) - 1u);
      // |rest - half a step| > QUOTIENT_SLACK, in wrapping arithmetic.
      if (rest - (1u << (shift - 1u)) + QUOTIENT_SLACK > 2u * QUOTIENT_SLACK) { return sign | min(fp8Magnitude(aq, fraction, minExponent), maxCode); }
    } else {
      let steps = exp2(f32(i32(fraction) - minExponent));
      let low = round(bitcast<f32>(max(aq, QUOTIENT_SLACK) - QUOTIENT_SLACK) * steps);
      if (low == round(bitcast<f32>(aq + QUOTIENT_SLACK) * steps)) { return sign | u32(low); }
    }
  }
  return fp8OfBits(quotientBits(x, s), fraction, minExponent, maxCode, nan);
}

// 1 / |s| for fp8OfQuotient, s as f32 bits.
fn inverseScale(s: u32) -> f32 {
  return 1.0 / bitcast<f32>(s & 0x7fffffffu);
}

// The fast path's constants of a row whose scale has f32 bits s, made once per row: 1 / s, and whether its codes all take the
// exact division (s negative, or outside [2^-100, 2^126], where x * (1 / s) may lose the sign, flush or overflow). With s in that
// range a quotient of an f32 subnormal x (flushed to zero or not) is below 2^-26, so its code is the signed zero either way.
struct Fp8Scale { inverse: f32, exact: bool }
fn fp8ScaleOf(s: u32) -> Fp8Scale {
  return Fp8Scale(1.0 / bitcast<f32>(s), s < 0x0d800000u || s > 0x7e800000u);
}

// The codes of four f32 bits b over a row's scale (fp8ScaleOf), lowest element in the lowest byte, from the product q = |x| * (1 / s):
// one integer rounding for every binade, and near[i] where element i's product lies within QUOTIENT_SLACK units of a rounding
// boundary (its code is then fp8ExactCode's, not this one's). Below fp8's smallest normal value N the steps are those of N's binade,
// so q + N (within one unit of exact, and q there is within 3.5 units of N's binade of the f32 quotient) is rounded there instead.
struct Fp8Word { word: u32, near: vec4<bool> }
fn fp8FastWord(b: vec4<u32>, k: Fp8Scale, fraction: u32, minExponent: i32, maxCode: u32, nan: u32) -> Fp8Word {
  let shift = 23u - fraction;
  let half = 1u << (shift - 1u);
  let smallest = u32(127 + minExponent) << 23u;
  let ax = b & vec4(0x7fffffffu);
  let q = bitcast<vec4<u32>>(bitcast<vec4<f32>>(ax) * k.inverse);
  let low = q < vec4(smallest);
  let r = bitcast<vec4<u32>>(bitcast<vec4<f32>>(q) + select(vec4(0.0), vec4(bitcast<f32>(smallest)), low));
  let steps = r - select(vec4(smallest - 0x800000u), vec4(smallest), low);
  let magnitude = min((steps + vec4(half - 1u) + ((steps >> vec4(shift)) & vec4(1u))) >> vec4(shift), vec4(maxCode));
  let code = select(magnitude | ((b >> vec4(24u)) & vec4(0x80u)), vec4(nan), ax > vec4(0x7f800000u));
  let near = (r & vec4((1u << shift) - 1u)) - vec4(half - QUOTIENT_SLACK) <= vec4(2u * QUOTIENT_SLACK);
  return Fp8Word(code.x | (code.y << 8u) | (code.z << 16u) | (code.w << 24u), near);
}

// The code of x / s by the exact division: what fp8OfQuotient gives where its product is too close to call.
fn fp8ExactCode(x: u32, s: u32, fraction: u32, minExponent: i32, maxCode: u32, nan: u32) -> u32 {
  return fp8OfBits(quotientBits(x, s), fraction, minExponent, maxCode, nan);
}

// Bit i set where near[i] is: the elements of a word that take the exact division.
fn fp8NearBits(near: vec4<bool>) -> u32 {
  let bits = select(vec4(0u), vec4(1u, 2u, 4u, 8u), near);
  return bits.x | bits.y | bits.z | bits.w;
}

// Word w with byte i set to code.
fn fp8WithCode(w: u32, i: u32, code: u32) -> u32 {
  return (w & ~(0xffu << (8u * i))) | (code << (8u * i));
}

// Word w of fp8FastWord with the codes of the elements in mask redone by the exact division: a loop over the set bits, so the
// division is compiled once per call, not once per element.
fn fp8FixWord(w: u32, b: vec4<u32>, s: u32, mask: u32, fraction: u32, minExponent: i32, maxCode: u32, nan: u32) -> u32 {
  var word = w;
  var m = mask;
  loop {
    if (m == 0u) { break; }
    let i = firstTrailingBit(m);
    m = m & (m - 1u);
    word = fp8WithCode(word, i, fp8ExactCode(b[i], s, fraction, minExponent, maxCode, nan));
  }
  return word;
}

// The exact value of an fp8 code as f32 bits.
fn bitsOfFp8(code: u32, fraction: u32, minExponent: i32, ieeeTop: bool) -> u32 {
  let sign = (code & 0x80u) << 24u;
  let magnitude = code & 0x7fu;
  let exponent = magnitude >> fraction;
  let mantissa = magnitude & ((1u << fraction) - 1u);
  let top = (0x7fu >> fraction);
  if (ieeeTop && exponent == top) { return select(0x7fc00000u, sign | 0x7f800000u, mantissa == 0u); }
  if (!ieeeTop && magnitude == 0x7fu) { return 0x7fc00000u; }
  if (exponent == 0u) {
    if (mantissa == 0u) { return sign; }
    let z = countLeadingZeros(mantissa) - (32u - fraction);
    let normalized = (mantissa << (z + 1u)) & ((1u << fraction) - 1u);
    return sign | (u32(minExponent - i32(z) - 1 + 127) << 23u) | (normalized << (23u - fraction));
  }
  return sign | (u32(i32(exponent) - 1 + minExponent + 127) << 23u) | (mantissa << (23u - fraction));
}
`;

/** WGSL expression: the fp8 code in `dtype` of f32 bits `bits`. */
export function fp8Encode(dtype: Fp8DType, bits: string): string {
  const f = FORMAT[dtype];
  return `fp8OfBits(${bits}, ${f.fraction}u, ${f.minExponent}, ${f.maxCode}u, ${f.nan}u)`;
}

/** WGSL expression: the fp8 code in `dtype` of x / s, both given as f32 bits. */
export function fp8Quotient(dtype: Fp8DType, x: string, s: string): string {
  const f = FORMAT[dtype];
  return `fp8OfQuotient(${x}, ${s}, inverseScale(${s}), ${f.fraction}u, ${f.minExponent}, ${f.maxCode}u, ${f.nan}u)`;
}

/** The format constants the fp8 functions take after their operands, as WGSL arguments. */
export function fp8FormatArgs(dtype: Fp8DType): string {
  const f = FORMAT[dtype];
  return `${f.fraction}u, ${f.minExponent}, ${f.maxCode}u, ${f.nan}u`;
}

/** WGSL expression (an Fp8Word): the fast codes of four f32 bits `bits` (a vec4<u32>) over the row constants `scale` (an Fp8Scale). */
export function fp8FastWordOf(dtype: Fp8DType, bits: string, scale: string): string {
  return `fp8FastWord(${bits}, ${scale}, ${fp8FormatArgs(dtype)})`;
}

/** WGSL expression: the exact code of x / s, both f32 bits. */
export function fp8ExactCodeOf(dtype: Fp8DType, x: string, s: string): string {
  return `fp8ExactCode(${x}, ${s}, ${fp8FormatArgs(dtype)})`;
}

/** WGSL expression: word `word` of fp8FastWord over f32 bits `bits` and scale bits `s`, the elements of `mask` redone exactly. */
export function fp8FixWordOf(dtype: Fp8DType, word: string, bits: string, s: string, mask: string): string {
  return `fp8FixWord(${word}, ${bits}, ${s}, ${mask}, ${fp8FormatArgs(dtype)})`;
}

/**
 * WGSL function `fp8Value(c: u32) -> u32`: the f32 bits of fp8 code c (its
 * low 8 bits) in `dtype`, as bitsOfFp8 gives them, in a few integer steps:
 * a normal code's bits shifted into place and rebiased, a subnormal one's
 * mantissa times the step (both exact), NaN canonical, e5m2's infinities signed.
 */
export function fp8ValueWgsl(dtype: Fp8DType): string {
  const f = FORMAT[dtype];
  const shift = 23 - f.fraction;
  const rebias = `0x${((127 + f.minExponent - 1) << 23).toString(16)}u`;
  const step = 2 ** (f.minExponent - f.fraction);
  const value = `select((m << ${shift}u) + ${rebias}, bitcast<u32>(f32(m) * ${step}), m < ${1 << f.fraction}u)`;
  const body =
    dtype === 'fp8e5m2'
      ? `let signed = ((c & 0x80u) << 24u) | select(${value}, 0x7f800000u, m == 0x7cu);
  return select(signed, 0x7fc00000u, m > 0x7cu);`
      : `return select(((c & 0x80u) << 24u) | ${value}, 0x7fc00000u, m == 0x7fu);`;
  return `fn fp8Value(c: u32) -> u32 {
  let m = c & 0x7fu;
  ${body}
}`;
}

/** WGSL expression: the f32 bits of fp8 code `code` in `dtype`. */
export function fp8Decode(dtype: Fp8DType, code: string): string {
  const f = FORMAT[dtype];
  return `bitsOfFp8(${code}, ${f.fraction}u, ${f.minExponent}, ${dtype === 'fp8e5m2'})`;
}
