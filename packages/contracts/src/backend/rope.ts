/**
 * RoPE angles, host side: the inverse frequencies f_j and the cos/sin rows
 * built from them. Every backend and the reference take their frequencies
 * from here, and the cos/sin writers apply the magnitude. The device-side
 * angle paths (WebGPU's turns table, CUDA's sincos) read the frequencies
 * only: plain RoPE's magnitude is 1, and a scaled variant that sets another
 * one must pass it to them too.
 */

/** What fixes the angles of an op given `ropeBase`. */
export interface RopeSpec {
  readonly ropeBase: number;
  readonly rotaryDim: number;
}

/** The angle of pair j at position p is p·frequencies[j]; cos and sin are then scaled by `magnitude`. */
export interface RopeAngles {
  /** f_j for j < R/2, in f64. */
  readonly frequencies: Float64Array;
  /** Factor on cos and sin: 1 for plain RoPE. */
  readonly magnitude: number;
}

/** Any typed array (or array) a caller wants the rows in: f64 for the reference, f32 for a device upload. */
export interface WritableNumbers {
  readonly length: number;
  [index: number]: number;
}

/** f_j = ropeBase^(-2j/R) for j < R/2, in f64. */
export function ropeFrequencies({ ropeBase, rotaryDim }: RopeSpec): Float64Array {
  const half = rotaryDim / 2;
  const f = new Float64Array(half);
  for (let j = 0; j < half; j++) f[j] = ropeBase ** ((-2 * j) / rotaryDim);
  return f;
}

/** The angles of `spec`: the one place where a scaling variant will choose its frequencies and magnitude. */
export function ropeAngles(spec: RopeSpec): RopeAngles {
  return { frequencies: ropeFrequencies(spec), magnitude: 1 };
}

/** Writes the row of `position`, cos(p·f_j) ‖ sin(p·f_j) times the magnitude, at out[offset .. offset + R), in f64 before the store. */
export function writeCosSinRow(out: WritableNumbers, offset: number, position: number, angles: RopeAngles): void {
  const { frequencies, magnitude } = angles;
  const half = frequencies.length;
  for (let j = 0; j < half; j++) {
    const angle = position * frequencies[j]!;
    out[offset + j] = magnitude * Math.cos(angle);
    out[offset + half + j] = magnitude * Math.sin(angle);
  }
}

/** Rows `first` .. `first + count - 1` of a `[P, R]` cos/sin cache, row p at out[p·R ..]. */
export function writeCosSinRows(out: WritableNumbers, first: number, count: number, angles: RopeAngles): void {
  const R = 2 * angles.frequencies.length;
  for (let p = first; p < first + count; p++) writeCosSinRow(out, p * R, p, angles);
}
