import { ropeAngles } from '@kvkit/contracts/backend';
import type { RopeStyle } from './cases.js';

/**
 * SEMANTICS.md's formulas in f64, written here from the page and not from
 * any backend: the check that does not trust the reference (for the CPU
 * backend in f32 the reference is the code under test). The one shared piece
 * is f_j, from the backend layer (its own tests hold it to the formula).
 * Inputs are the values a backend holds, read back; outputs are unrounded.
 */

/** Indices (a, b) of the j-th rotated pair of a head. */
export function ropePair(j: number, rotaryDim: number, style: RopeStyle): [number, number] {
  return style === 'gptj' ? [2 * j, 2 * j + 1] : [j, j + rotaryDim / 2];
}

/** Rotates the first R elements of x (length D) in place: pair (a, b) by the angle whose cos and sin are given. */
export function rotate(x: Float64Array, cos: ArrayLike<number>, sin: ArrayLike<number>, rotaryDim: number, style: RopeStyle): void {
  for (let j = 0; j < rotaryDim / 2; j++) {
    const [a, b] = ropePair(j, rotaryDim, style);
    const xa = x[a]!;
    const xb = x[b]!;
    x[a] = xa * cos[j]! - xb * sin[j]!;
    x[b] = xb * cos[j]! + xa * sin[j]!;
  }
}

export interface FusedInputs {
  readonly T: number;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: RopeStyle;
  /** `[T, L, 2*H*D]` */
  readonly kv: ArrayLike<number>;
  /** `[L, D]` */
  readonly kNormWeight: ArrayLike<number>;
  /** `[L]` */
  readonly eps: ArrayLike<number>;
  /** `[P, R]`; or undefined with `ropeBase` given. */
  readonly cosSinCache?: ArrayLike<number>;
  readonly ropeBase?: number;
  /** `[T]`, or with `mropeSection` the `[3, T]` streams flattened (stream s of token t at s * T + t). */
  readonly positions: readonly number[];
  /** mRoPE: pairs per stream [temporal, height, width]. */
  readonly mropeSection?: readonly number[];
  /** The section in Qwen3-VL's interleaved layout (docs/rope/mrope-interleaved). */
  readonly mropeInterleaved?: boolean;
}

/**
 * mRoPE (docs/rope/mrope): the stream (0 temporal, 1 height, 2 width) whose
 * position rotates pair j. Interleaved (docs/rope/mrope-interleaved): height
 * where j % 3 == 1 and j < 3·h, width where j % 3 == 2 and j < 3·w, else temporal.
 */
export function mropeStreamOf(section: readonly number[], j: number, interleaved = false): number {
  if (interleaved) return j % 3 === 1 && j < 3 * section[1]! ? 1 : j % 3 === 2 && j < 3 * section[2]! ? 2 : 0;
  return j < section[0]! ? 0 : j < section[0]! + section[1]! ? 1 : 2;
}

/** LongRoPE's fields, as docs/rope/longrope names them. */
export interface LongropeScaling {
  readonly shortFactor: readonly number[];
  readonly longFactor: readonly number[];
  readonly originalMaxPositions: number;
  readonly factor?: number;
  readonly attentionFactor?: number;
  readonly sequenceLength?: number;
}

/**
 * LongRoPE (docs/rope/longrope) in f64, from the page: f_j = ropeBase^(-2j/R)
 * / factor_j with the long factors when the sequence (sequenceLength, else
 * factor · originalMaxPositions) is past originalMaxPositions, and cos/sin
 * scaled by attentionFactor, else sqrt(1 + ln(factor) / ln(originalMaxPositions)).
 */
export function longropeOracle(ropeBase: number, R: number, s: LongropeScaling): { frequencies: Float64Array; magnitude: number } {
  const factor = s.factor ?? 1;
  const long = (s.sequenceLength ?? factor * s.originalMaxPositions) > s.originalMaxPositions;
  const factors = long ? s.longFactor : s.shortFactor;
  const frequencies = Float64Array.from({ length: R / 2 }, (_, j) => Math.exp((-2 * j * Math.log(ropeBase)) / R) / factors[j]!);
  const magnitude = s.attentionFactor ?? (factor > 1 ? Math.sqrt(1 + Math.log(factor) / Math.log(s.originalMaxPositions)) : 1);
  return { frequencies, magnitude };
}

/** cos and sin of token t's R/2 angles: its position's, or under mRoPE pair j's from its stream's position. */
function tokenAngles(a: FusedInputs, t: number): { cos: Float64Array; sin: Float64Array } {
  const section = a.mropeSection;
  if (!section) return anglesAt(a.positions[t]!, a);
  const streams = [0, 1, 2].map((s) => anglesAt(a.positions[s * a.T + t]!, a));
  const cos = new Float64Array(a.R / 2);
  const sin = new Float64Array(a.R / 2);
  for (let j = 0; j < a.R / 2; j++) {
    const s = streams[mropeStreamOf(section, j, a.mropeInterleaved)]!;
    cos[j] = s.cos[j]!;
    sin[j] = s.sin[j]!;
  }
  return { cos, sin };
}

/** K after RMSNorm only, `[L, T, H, D]`: what rotation must preserve pair by pair, and leave as is past R. */
export function normedK(a: FusedInputs): Float64Array {
  const { T, L, H, D } = a;
  const out = new Float64Array(L * T * H * D);
  for (let t = 0; t < T; t++) {
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < H; h++) {
        const src = (t * L + l) * 2 * H * D + h * D;
        let sum = 0;
        for (let i = 0; i < D; i++) sum += a.kv[src + i]! ** 2;
        const inv = 1 / Math.sqrt(sum / D + a.eps[l]!);
        const dst = ((l * T + t) * H + h) * D;
        for (let i = 0; i < D; i++) out[dst + i] = a.kv[src + i]! * inv * a.kNormWeight[l * D + i]!;
      }
    }
  }
  return out;
}

/** cos and sin of position p's R/2 angles: from the cache row, or from ropeBase in f64. */
export function anglesAt(p: number, a: { R: number; cosSinCache?: ArrayLike<number>; ropeBase?: number }): { cos: Float64Array; sin: Float64Array } {
  const half = a.R / 2;
  const cos = new Float64Array(half);
  const sin = new Float64Array(half);
  if (a.cosSinCache !== undefined) {
    for (let j = 0; j < half; j++) {
      cos[j] = a.cosSinCache[p * a.R + j]!;
      sin[j] = a.cosSinCache[p * a.R + half + j]!;
    }
  } else {
    const f = ropeAngles({ ropeBase: a.ropeBase!, rotaryDim: a.R }).frequencies;
    for (let j = 0; j < half; j++) {
      cos[j] = Math.cos(p * f[j]!);
      sin[j] = Math.sin(p * f[j]!);
    }
  }
  return { cos, sin };
}

/** `fusedNormRopeStacked`: kOut and vOut `[L, T, H, D]`. */
export function fusedNormRopeStackedOracle(a: FusedInputs): { k: Float64Array; v: Float64Array } {
  const { T, L, H, D } = a;
  const k = normedK(a);
  const v = new Float64Array(L * T * H * D);
  for (let t = 0; t < T; t++) {
    const { cos, sin } = tokenAngles(a, t);
    for (let l = 0; l < L; l++) {
      for (let h = 0; h < H; h++) {
        const dst = ((l * T + t) * H + h) * D;
        rotate(k.subarray(dst, dst + D), cos, sin, a.R, a.ropeStyle);
        const src = (t * L + l) * 2 * H * D + H * D + h * D;
        for (let i = 0; i < D; i++) v[dst + i] = a.kv[src + i]!;
      }
    }
  }
  return { k, v };
}

/** `ropePoolFused`'s qRot `[N, Hq, D]` and kRot `[N, H, D]` (the pool rows are kRot and v at the slots). */
export function ropePoolFusedOracle(a: {
  N: number;
  Hq: number;
  H: number;
  D: number;
  R: number;
  ropeStyle: RopeStyle;
  ropeBase: number;
  q: ArrayLike<number>;
  k: ArrayLike<number>;
  positions: readonly number[];
}): { qRot: Float64Array; kRot: Float64Array } {
  const qRot = Float64Array.from(a.q);
  const kRot = Float64Array.from(a.k);
  for (let n = 0; n < a.N; n++) {
    const { cos, sin } = anglesAt(a.positions[n]!, a);
    for (let h = 0; h < a.Hq; h++) rotate(qRot.subarray((n * a.Hq + h) * a.D, (n * a.Hq + h + 1) * a.D), cos, sin, a.R, a.ropeStyle);
    for (let h = 0; h < a.H; h++) rotate(kRot.subarray((n * a.H + h) * a.D, (n * a.H + h + 1) * a.D), cos, sin, a.R, a.ropeStyle);
  }
  return { qRot, kRot };
}

/** `proj[t, l, o] = Σ_i ctxHidden[t, i] * kvWeight[l, o, i]`, `[T, L, 2*H*D]`. */
export function projectionOracle(ctxHidden: ArrayLike<number>, kvWeight: ArrayLike<number>, T: number, L: number, out: number, hidden: number): Float64Array {
  const proj = new Float64Array(T * L * out);
  for (let t = 0; t < T; t++) {
    for (let l = 0; l < L; l++) {
      for (let o = 0; o < out; o++) {
        let sum = 0;
        const w = (l * out + o) * hidden;
        for (let i = 0; i < hidden; i++) sum += ctxHidden[t * hidden + i]! * kvWeight[w + i]!;
        proj[(t * L + l) * out + o] = sum;
      }
    }
  }
  return proj;
}
