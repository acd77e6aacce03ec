/**
 * RoPE angles, host side: the inverse frequencies f_j of plain and scaled
 * RoPE, the magnitude YaRN and LongRoPE put on cos and sin, the exact reduction of the
 * angle p·f_j to turns, and the table the device paths read. Every backend
 * and the reference take their numbers from here.
 *
 * Two conventions (`angles`):
 *  - 'exact': f_j is the f64 value of its formula, and the angle is p·f_j as
 *    a real number (not rounded): cos and sin are those of that angle for
 *    any position below 2^31, to the rounding of the output.
 *  - 'float32': f_j as transformers builds it in f32 tensors, the angle
 *    fround(fround(p)·f_j) as transformers, vLLM and SGLang compute it, bit
 *    for bit; cos and sin are then those of that f32 angle.
 */
import type { RopeScaling } from '../generated/signatures.js';

export type { RopeScaling };
/** How RoPE angles are computed (the ops' `angles` option): 'exact' reduces p·f_j exactly, 'float32' rounds it as transformers, vLLM and SGLang do. */
export type RopeAngleMode = 'exact' | 'float32';

/** What fixes the angles of an op given `ropeBase`. */
export interface RopeSpec {
  readonly ropeBase: number;
  readonly rotaryDim: number;
  readonly ropeScaling?: RopeScaling | undefined;
  readonly angles?: RopeAngleMode | undefined;
}

/** The angle of pair j at position p is p·frequencies[j] (see the module doc); cos and sin are then scaled by `magnitude`. */
export interface RopeAngles {
  /** f_j for j < R/2: f64 values ('exact'), or f32 values held in f64 ('float32'). */
  readonly frequencies: Float64Array;
  /** Factor on cos and sin: 1 except for YaRN and LongRoPE (their attention factor). An f32 value in 'float32' mode. */
  readonly magnitude: number;
  readonly mode: RopeAngleMode;
  /** f_j / 2π as 96-bit fractions, three u32 words per pair, most significant first. */
  readonly turns: Uint32Array;
}

/** Any typed array (or array) a caller wants the rows in: f64 for the reference, f32 for a device upload. */
export interface WritableNumbers {
  readonly length: number;
  [index: number]: number;
}

// ---------- frequencies ----------

/** f_j = ropeBase^(-2j/R) for j < R/2, in f64. */
export function ropeFrequencies({ ropeBase, rotaryDim }: { readonly ropeBase: number; readonly rotaryDim: number }): Float64Array {
  const half = rotaryDim / 2;
  const f = new Float64Array(half);
  for (let j = 0; j < half; j++) f[j] = ropeBase ** ((-2 * j) / rotaryDim);
  return f;
}

/**
 * The base dynamic NTK grows to for a sequence of `sequenceLength` tokens
 * (default factor·originalMaxPositions: the context the factor was declared
 * for, as vLLM fixes it); unchanged up to the original context, as in
 * transformers. A fixed rule, so no call reads positions back from the device.
 */
export function dynamicBase(ropeBase: number, rotaryDim: number, s: Extract<RopeScaling, { type: 'dynamic' }>): number {
  const seq = s.sequenceLength ?? s.factor * s.originalMaxPositions;
  if (seq <= s.originalMaxPositions || rotaryDim <= 2) return ropeBase;
  return ropeBase * ((s.factor * seq) / s.originalMaxPositions - (s.factor - 1)) ** (rotaryDim / (rotaryDim - 2));
}

/** Llama 3.1's rescaling of plain frequencies `f` (each in place). */
function llama3Frequencies(f: Float64Array, s: Extract<RopeScaling, { type: 'llama3' }>): void {
  const lowWavelength = s.originalMaxPositions / s.lowFreqFactor;
  const highWavelength = s.originalMaxPositions / s.highFreqFactor;
  for (let j = 0; j < f.length; j++) {
    const wavelength = (2 * Math.PI) / f[j]!;
    if (wavelength > lowWavelength) f[j] = f[j]! / s.factor;
    else if (wavelength >= highWavelength) {
      const smooth = (s.originalMaxPositions / wavelength - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      f[j] = (1 - smooth) * (f[j]! / s.factor) + smooth * f[j]!;
    }
  }
}

/** YaRN's attention factor: 0.1·m·ln(s) + 1 for s > 1. */
const yarnMscale = (scale: number, m = 1) => (scale <= 1 ? 1 : 0.1 * m * Math.log(scale) + 1);

/** The magnitude YaRN puts on cos and sin. */
export function yarnMagnitude(s: Extract<RopeScaling, { type: 'yarn' }>): number {
  if (s.attentionFactor !== undefined) return s.attentionFactor;
  if (s.mscale && s.mscaleAllDim) return yarnMscale(s.factor, s.mscale) / yarnMscale(s.factor, s.mscaleAllDim);
  return yarnMscale(s.factor);
}

/** The pairs YaRN's ramp runs between: extrapolated up to `low`, interpolated from `high`. */
function yarnRamp(ropeBase: number, rotaryDim: number, s: Extract<RopeScaling, { type: 'yarn' }>): { low: number; high: number } {
  // The pair index at which a frequency turns `rotations` times over the original context.
  const pairAt = (rotations: number) => (rotaryDim * Math.log(s.originalMaxPositions / (rotations * 2 * Math.PI))) / (2 * Math.log(ropeBase));
  const low = Math.max(Math.floor(pairAt(s.betaFast ?? 32)), 0);
  const high = Math.min(Math.ceil(pairAt(s.betaSlow ?? 1)), rotaryDim - 1);
  return { low, high: high === low ? high + 0.001 : high };
}

/** YaRN's blend of plain frequencies `f` (in place): extrapolated below the ramp, interpolated (÷ factor) above it. */
function yarnFrequencies(f: Float64Array, ropeBase: number, rotaryDim: number, s: Extract<RopeScaling, { type: 'yarn' }>): void {
  const { low, high } = yarnRamp(ropeBase, rotaryDim, s);
  for (let j = 0; j < f.length; j++) {
    const ramp = Math.min(Math.max((j - low) / (high - low), 0), 1);
    f[j] = (f[j]! / s.factor) * ramp + f[j]! * (1 - ramp);
  }
}

/**
 * The factors LongRoPE divides the frequencies by: `longFactor` for a sequence
 * past the original context, `shortFactor` otherwise, as transformers picks
 * them from `seq_len`. The sequence length is `sequenceLength`, or
 * factor·originalMaxPositions (the context the factor was declared for, as
 * dynamic NTK takes it); never read from the positions.
 */
export function longropeFactors(s: Extract<RopeScaling, { type: 'longrope' }>): readonly number[] {
  const seq = s.sequenceLength ?? (s.factor ?? 1) * s.originalMaxPositions;
  return seq > s.originalMaxPositions ? s.longFactor : s.shortFactor;
}

/** LongRoPE's magnitude on cos and sin: attentionFactor, else sqrt(1 + ln(factor) / ln(originalMaxPositions)), 1 for factor <= 1. */
export function longropeMagnitude(s: Extract<RopeScaling, { type: 'longrope' }>): number {
  if (s.attentionFactor !== undefined) return s.attentionFactor;
  const factor = s.factor ?? 1;
  return factor <= 1 ? 1 : Math.sqrt(1 + Math.log(factor) / Math.log(s.originalMaxPositions));
}

/** The frequencies and magnitude of a spec's scaling, in f64, over its plain frequencies `f` (rescaled in place). */
function scaled(f: Float64Array, spec: RopeSpec): { frequencies: Float64Array; magnitude: number } {
  const s = spec.ropeScaling;
  if (s === undefined) return { frequencies: f, magnitude: 1 };
  switch (s.type) {
    case 'linear':
      for (let j = 0; j < f.length; j++) f[j] = f[j]! / s.factor;
      return { frequencies: f, magnitude: 1 };
    case 'dynamic':
      return { frequencies: f, magnitude: 1 };
    case 'llama3':
      llama3Frequencies(f, s);
      return { frequencies: f, magnitude: 1 };
    case 'yarn':
      yarnFrequencies(f, spec.ropeBase, spec.rotaryDim, s);
      return { frequencies: f, magnitude: yarnMagnitude(s) };
    case 'longrope': {
      const factors = longropeFactors(s);
      for (let j = 0; j < f.length; j++) f[j] = f[j]! / factors[j]!;
      return { frequencies: f, magnitude: longropeMagnitude(s) };
    }
  }
}

/** The base plain frequencies start from: `ropeBase`, or the grown base of dynamic NTK. */
const baseOf = (spec: RopeSpec) => (spec.ropeScaling?.type === 'dynamic' ? dynamicBase(spec.ropeBase, spec.rotaryDim, spec.ropeScaling) : spec.ropeBase);

/** torch's `base ** (arange(0, R, 2).float() / R)` in f32, with a correctly rounded pow. */
function torchPowers(ropeBase: number, rotaryDim: number): Float64Array {
  const base = Math.fround(ropeBase);
  return Float64Array.from({ length: rotaryDim / 2 }, (_, j) => Math.fround(base ** Math.fround((2 * j) / rotaryDim)));
}

/** torch's plain inverse frequencies in f32: 1 / base ** (arange(0, R, 2).float() / R), each step rounded to f32. */
export function float32Frequencies(ropeBase: number, rotaryDim: number): Float64Array {
  return torchPowers(ropeBase, rotaryDim).map((p) => Math.fround(1 / p));
}

/**
 * The frequencies and magnitude of 'float32' mode: transformers' f32 tensor
 * steps for each variant, each product, quotient and sum rounded to f32 (a
 * Python scalar next to a tensor taken as f32, `x / t` as `x * (1 / t)`).
 */
function float32Scaled(spec: RopeSpec): { frequencies: Float64Array; magnitude: number } {
  const F = Math.fround;
  const s = spec.ropeScaling;
  const R = spec.rotaryDim;
  if (s?.type === 'dynamic') return { frequencies: float32Frequencies(dynamicBase(spec.ropeBase, R, s), R), magnitude: 1 };
  const f = float32Frequencies(spec.ropeBase, R);
  if (s === undefined) return { frequencies: f, magnitude: 1 };
  switch (s.type) {
    case 'linear':
      return { frequencies: f.map((x) => F(x / F(s.factor))), magnitude: 1 };
    case 'llama3': {
      const [lowWavelength, highWavelength] = [F(s.originalMaxPositions / s.lowFreqFactor), F(s.originalMaxPositions / s.highFreqFactor)];
      const frequencies = f.map((x) => {
        const wavelength = F(F(1 / x) * F(2 * Math.PI));
        const kept = wavelength > lowWavelength ? F(x / F(s.factor)) : x;
        if (wavelength < highWavelength || wavelength > lowWavelength) return kept;
        const smooth = F(F(F(F(1 / wavelength) * F(s.originalMaxPositions)) - F(s.lowFreqFactor)) / F(s.highFreqFactor - s.lowFreqFactor));
        return F(F(F(F(1 - smooth) * kept) / F(s.factor)) + F(smooth * kept));
      });
      return { frequencies, magnitude: 1 };
    }
    case 'yarn': {
      const { low, high } = yarnRamp(spec.ropeBase, R, s);
      const frequencies = torchPowers(spec.ropeBase, R).map((p, j) => {
        const extrapolated = F(1 - Math.min(Math.max(F(F(j - low) / F(high - low)), 0), 1));
        return F(F(F(1 / F(F(s.factor) * p)) * F(1 - extrapolated)) + F(F(1 / p) * extrapolated));
      });
      return { frequencies, magnitude: F(yarnMagnitude(s)) };
    }
    case 'longrope': {
      // 1.0 / (ext_factors * base ** (arange(0, R, 2).float() / R)), the factors an f32 tensor.
      const factors = longropeFactors(s);
      const frequencies = torchPowers(spec.ropeBase, R).map((p, j) => F(1 / F(F(factors[j]!) * p)));
      return { frequencies, magnitude: F(longropeMagnitude(s)) };
    }
  }
}

/**
 * A key for the angle table of a spec, equal for specs with the same angles:
 * a LongRoPE sequence length only picks one of its two lists, so a backend
 * keeps two tables for it however many lengths its calls pass.
 */
export function ropeAnglesKey(spec: RopeSpec): string {
  const s = spec.ropeScaling;
  const scaling = s?.type === 'longrope' ? { ...s, sequenceLength: undefined, long: longropeFactors(s) === s.longFactor } : (s ?? null);
  return JSON.stringify([spec.ropeBase, spec.rotaryDim, scaling, spec.angles ?? 'exact']);
}

/** The angles of `spec`: the one place where every scaling variant chooses its frequencies and magnitude. */
export function ropeAngles(spec: RopeSpec): RopeAngles {
  const mode = spec.angles ?? 'exact';
  const { frequencies, magnitude } = mode === 'exact' ? scaled(ropeFrequencies({ ropeBase: baseOf(spec), rotaryDim: spec.rotaryDim }), spec) : float32Scaled(spec);
  return { frequencies, magnitude, mode, turns: turnsOfFrequencies(frequencies) };
}

// ---------- exact reduction ----------

/** floor(π·2^bits), by Machin's formula in integers. */
function piTimesTwoTo(bits: bigint): bigint {
  const guard = 32n;
  const one = 1n << (bits + guard);
  const arctanInverse = (x: bigint) => {
    let sum = 0n;
    let power = one / x;
    const x2 = x * x;
    for (let k = 1n, sign = 1n; power !== 0n; k += 2n, sign = -sign) {
      sum += (sign * power) / k;
      power /= x2;
    }
    return sum;
  };
  return (16n * arctanInverse(5n) - 4n * arctanInverse(239n)) >> guard;
}

/** 1/(2π) as a fixed-point fraction of INVERSE_BITS bits: far more than an f64 frequency times a 2^63 position needs. */
const INVERSE_BITS = 256n;
const INVERSE_TWO_PI = (1n << (2n * INVERSE_BITS)) / (2n * piTimesTwoTo(INVERSE_BITS));

/** x = mantissa · 2^exponent exactly, for a finite x >= 0. */
function dyadic(x: number): { mantissa: bigint; exponent: number } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, x);
  const hi = view.getUint32(0);
  const biased = (hi >>> 20) & 0x7ff;
  const fraction = (BigInt(hi & 0xfffff) << 32n) | BigInt(view.getUint32(4));
  return biased === 0 ? { mantissa: fraction, exponent: -1074 } : { mantissa: fraction | (1n << 52n), exponent: biased - 1075 };
}

/** The fractional part of (integer · x / 2π), as `bits` fixed-point bits (x an f64 >= 0, integer >= 0). */
function turnsFraction(integer: bigint, x: number, bits: number): bigint {
  const { mantissa, exponent } = dyadic(x);
  const product = integer * mantissa * INVERSE_TWO_PI;
  const shift = BigInt(exponent) - INVERSE_BITS + BigInt(bits);
  const scaledProduct = shift >= 0n ? product << shift : (product + (1n << (-shift - 1n))) >> -shift;
  return BigInt.asUintN(bits, scaledProduct);
}

/** A 128-bit fraction of a turn as the nearest number in [-1/2, 1/2). */
const centered = (fraction: bigint) => Number(BigInt.asIntN(128, fraction)) / 2 ** 128;

/**
 * The angle position·frequency in turns, reduced to [-1/2, 1/2), computed
 * exactly in integers: the oracle the fast paths are measured against.
 */
export function exactTurns(position: number, frequency: number): number {
  const t = centered(turnsFraction(BigInt(Math.abs(position)), frequency, 128));
  return position < 0 ? -t : t;
}

/** f_j / 2π mod 1 as 96-bit fractions, three u32 words per pair (most significant first): whole turns change no angle at an integer position (a LongRoPE factor below 1 can push f_j past 1). */
function turnsOfFrequencies(frequencies: Float64Array): Uint32Array {
  const words = new Uint32Array(3 * frequencies.length);
  frequencies.forEach((f, j) => {
    const g = turnsFraction(1n, f, 96);
    words[3 * j] = Number(g >> 64n);
    words[3 * j + 1] = Number((g >> 32n) & 0xffffffffn);
    words[3 * j + 2] = Number(g & 0xffffffffn);
  });
  return words;
}

/**
 * position · (f_j / 2π) mod 1 in [-1/2, 1/2), from the 96-bit fraction
 * `turns` of pair j, in f64: 16-bit pieces of the position times 32-bit
 * words are exact products, so only the final sum rounds (about 2^-52 turns).
 */
export function turnsAt(position: number, turns: Uint32Array, j: number): number {
  let rest = Math.abs(position);
  let sum = 0;
  for (let piece = 0; rest > 0; piece++, rest = Math.floor(rest / 65536)) {
    const chunk = rest % 65536;
    for (let w = 0; w < 3; w++) {
      const exponent = 16 * piece - 32 * (w + 1);
      if (exponent >= 0) continue; // a whole number of turns
      const y = chunk * turns[3 * j + w]! * 2 ** exponent;
      sum += y - Math.floor(y);
    }
  }
  const t = sum - Math.round(sum);
  return position < 0 ? -t : t;
}

/** The f32 angle of 'float32' mode: fround(fround(p)·f_j), as torch's f32 product gives it. */
export const float32Angle = (position: number, frequency: number) => Math.fround(Math.fround(position) * frequency);

// ---------- cos/sin rows ----------

/** Writes the row of `position`, cos ‖ sin of each pair's angle times the magnitude, at out[offset .. offset + R), in f64 before the store. */
export function writeCosSinRow(out: WritableNumbers, offset: number, position: number, angles: RopeAngles): void {
  const { frequencies, magnitude, mode, turns } = angles;
  const half = frequencies.length;
  for (let j = 0; j < half; j++) {
    // Math.cos reduces a large f64 argument exactly, so the f32 angle needs no help.
    const angle = mode === 'float32' ? float32Angle(position, frequencies[j]!) : 2 * Math.PI * turnsAt(position, turns, j);
    out[offset + j] = magnitude * Math.cos(angle);
    out[offset + half + j] = magnitude * Math.sin(angle);
  }
}

/** Rows `first` .. `first + count - 1` of a `[P, R]` cos/sin cache, row p at out[p·R ..]. */
export function writeCosSinRows(out: WritableNumbers, first: number, count: number, angles: RopeAngles): void {
  const R = 2 * angles.frequencies.length;
  for (let p = first; p < first + count; p++) writeCosSinRow(out, p * R, p, angles);
}

// ---------- the device table ----------

/** Exponents of the f32 angles 'float32' mode reduces on the device: 2^-24 (an angle near π/4) up to 2^40. */
export const FLOAT32_REDUCTION_EXPONENTS = { first: -24, last: 40 } as const;

/** Words of the device table ahead of the pairs: mode, magnitude (f32 bits), R/2, one spare. */
export const ANGLE_TABLE_HEADER_WORDS = 4;

/**
 * The angle table every device path reads, as u32 words:
 *   [0] 0 exact / 1 float32, [1] magnitude as f32 bits, [2] R/2, [3] 0;
 *   per pair j (4 words): f_j / 2π as a 96-bit fraction (most significant
 *     word first), then f_j as f32 bits;
 *   per exponent e of FLOAT32_REDUCTION_EXPONENTS (4 words): 2^e / 2π mod 1
 *     as a 96-bit fraction, then 0. An f32 angle m·2^e (m a 24-bit integer)
 *     is m times that fraction mod 1 turns, exactly.
 */
export function ropeAngleTable(angles: RopeAngles): Uint32Array {
  const half = angles.frequencies.length;
  const { first, last } = FLOAT32_REDUCTION_EXPONENTS;
  const words = new Uint32Array(ANGLE_TABLE_HEADER_WORDS + 4 * half + 4 * (last - first + 1));
  const f32 = new Float32Array(words.buffer);
  words[0] = angles.mode === 'float32' ? 1 : 0;
  f32[1] = angles.magnitude;
  words[2] = half;
  for (let j = 0; j < half; j++) {
    const at = ANGLE_TABLE_HEADER_WORDS + 4 * j;
    words.set(angles.turns.subarray(3 * j, 3 * j + 3), at);
    f32[at + 3] = angles.frequencies[j]!;
  }
  for (let e = first; e <= last; e++) {
    const g = turnsFraction(1n, 2 ** e, 96);
    const at = ANGLE_TABLE_HEADER_WORDS + 4 * half + 4 * (e - first);
    words[at] = Number(g >> 64n);
    words[at + 1] = Number((g >> 32n) & 0xffffffffn);
    words[at + 2] = Number(g & 0xffffffffn);
  }
  return words;
}
