/** How far one output is from the reference's. */
export interface Difference {
  /** ‖out − ref‖ / ‖ref‖ over the whole output, in f64 (the measure the conformance tolerances use); ∞ where a value is NaN, or infinite on one side only. */
  readonly relative: number;
  /** The largest |out − ref| of one element, and where. */
  readonly largest: number;
  readonly largestAt: number;
}

export function difference(out: Float32Array, ref: Float32Array): Difference {
  if (out.length !== ref.length) return { relative: Infinity, largest: Infinity, largestAt: 0 };
  let diff = 0;
  let norm = 0;
  let largest = 0;
  let largestAt = 0;
  for (let i = 0; i < out.length; i++) {
    const a = out[i]!;
    const b = ref[i]!;
    // NaN never matches; an infinity both sides agree on is no difference.
    const d = Number.isNaN(a) || Number.isNaN(b) ? Infinity : a === b ? 0 : Number.isFinite(a) && Number.isFinite(b) ? Math.abs(a - b) : Infinity;
    diff += d * d;
    if (Number.isFinite(b)) norm += b * b;
    if (d > largest) {
      largest = d;
      largestAt = i;
    }
  }
  const relative = diff === 0 ? 0 : norm === 0 ? Infinity : Math.sqrt(diff) / Math.sqrt(norm);
  return { relative, largest, largestAt };
}

/** `3.1e-7`, `0`, `∞`: few digits, as a reader compares them with a tolerance. */
export function formatError(x: number): string {
  if (x === 0) return '0';
  if (!Number.isFinite(x)) return '∞';
  return x.toExponential(1);
}

/** A value as the table shows it: enough digits to see a last-bit difference in f32. */
export function formatValue(x: number): string {
  return Number.isFinite(x) ? x.toPrecision(7) : String(x);
}
