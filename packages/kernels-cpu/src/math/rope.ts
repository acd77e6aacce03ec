export type RopeStyle = 'neox' | 'gptj';

/**
 * Rotates the first `rotaryDim` elements of one head in place, in f64. The
 * angles come as a cos/sin row laid out like a cache row: cos of each pair at
 * `cs[o + j]`, its sin at `cs[o + R/2 + j]`. neox pairs j with j + R/2, gptj
 * pairs 2j with 2j + 1; elements from `rotaryDim` on are left as they are.
 */
export function rotateInPlace(x: Float64Array, cs: ArrayLike<number>, o: number, rotaryDim: number, style: RopeStyle): void {
  const half = rotaryDim / 2;
  const stride = style === 'neox' ? 1 : 2;
  const partner = style === 'neox' ? half : 1;
  for (let j = 0; j < half; j++) {
    const c = cs[o + j]!;
    const s = cs[o + half + j]!;
    const a = j * stride;
    const b = a + partner;
    const xa = x[a]!;
    const xb = x[b]!;
    x[a] = xa * c - xb * s;
    x[b] = xb * c + xa * s;
  }
}

/** f_j = base^(-2j/R) for j < R/2, in f64. */
export function ropeFrequencies(ropeBase: number, rotaryDim: number): Float64Array {
  const half = rotaryDim / 2;
  const f = new Float64Array(half);
  for (let j = 0; j < half; j++) f[j] = ropeBase ** ((-2 * j) / rotaryDim);
  return f;
}

/** Writes the cos/sin row of `position` (cos(p·f_j) ‖ sin(p·f_j)) at out[o..o+R), in f64. */
export function fillCosSinRow(out: Float64Array, o: number, position: number, frequencies: Float64Array): void {
  const half = frequencies.length;
  for (let j = 0; j < half; j++) {
    const angle = position * frequencies[j]!;
    out[o + j] = Math.cos(angle);
    out[o + half + j] = Math.sin(angle);
  }
}
