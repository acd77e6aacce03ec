/** Anything that yields an f64 per index: a decoded weight or eps tensor. */
export interface Readable {
  get(i: number): number;
}

/**
 * RMSNorm of one head in place, in f64: for i < n,
 * x[i] ← x[i] · (1 / sqrt(mean(x²) + eps)) · weight[weightOffset + i].
 */
export function rmsNormInPlace(x: Float64Array, n: number, weight: Readable, weightOffset: number, eps: number): void {
  let sumSquares = 0;
  for (let i = 0; i < n; i++) sumSquares += x[i]! * x[i]!;
  const inv = 1 / Math.sqrt(sumSquares / n + eps);
  for (let i = 0; i < n; i++) x[i] = x[i]! * inv * weight.get(weightOffset + i);
}
