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
