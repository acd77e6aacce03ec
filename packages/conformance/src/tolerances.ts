import type { FloatDType } from '@kvkit/contracts';

/**
 * How close is close enough (SEMANTICS.md, "Precision"): the relative error
 * ‖out − ref‖ / ‖ref‖ over a whole output, per storage dtype. Copies are
 * compared bit for bit. NaN and infinity never pass.
 */
export const RELATIVE_TOLERANCE: Readonly<Record<FloatDType, number>> = { f32: 1e-5, f16: 2e-3, bf16: 1e-2 };

/**
 * Where RoPE angles come from `ropeBase` rather than a cache, a backend may
 * compute `p * f_j` in f32: f_j and the product are each rounded (about one
 * ulp each, up to 2^-24 relative), and cos/sin add a little more. A rotation
 * off by δ radians moves a vector by at most |δ| of its length, so the
 * tolerance grows by 4 * 2^-24 * (largest position): 2.4e-4 at position 1000.
 */
export function ropeBaseTolerance(dtype: FloatDType, maxPosition: number): number {
  return RELATIVE_TOLERANCE[dtype] + 4 * 2 ** -24 * Math.max(0, maxPosition);
}

export interface Comparison {
  readonly ok: boolean;
  /** Relative error (∞ when NaN or infinity was seen, 0 for two empty arrays). */
  readonly error: number;
  /** One paragraph a failing test prints: what, how far off, where the worst element is. */
  readonly message: string;
}

/** `[l=1, t=2, h=0, d=5]` for a flat index, given the shape and its axis names. */
export function describeIndex(flat: number, shape: readonly number[], axes?: readonly string[]): string {
  if (shape.length === 0) return `[${flat}]`;
  const parts: string[] = [];
  let rest = flat;
  for (let i = shape.length - 1; i >= 0; i--) {
    const d = shape[i]!;
    parts.unshift(`${axes?.[i] ?? `#${i}`}=${d > 0 ? rest % d : 0}`);
    rest = d > 0 ? Math.floor(rest / d) : 0;
  }
  return `[${parts.join(', ')}]`;
}

export interface Layout {
  readonly shape: readonly number[];
  readonly axes?: readonly string[];
}

function countNonFinite(values: ArrayLike<number>): number {
  let n = 0;
  for (let i = 0; i < values.length; i++) if (!Number.isFinite(values[i])) n++;
  return n;
}

/**
 * ‖actual − expected‖ / ‖expected‖ against `tolerance`. Fails on a length
 * mismatch, on any NaN or infinity in either array, and past the tolerance;
 * the message names the worst element by its axes.
 */
function compareRelative(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance: number, layout?: Layout): Comparison {
  if (actual.length !== expected.length) {
    return { ok: false, error: Infinity, message: `${what}: ${actual.length} elements, expected ${expected.length}` };
  }
  const badActual = countNonFinite(actual);
  const badExpected = countNonFinite(expected);
  let diff2 = 0;
  let ref2 = 0;
  let worst = -1;
  let worstAbs = -1;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    const d = Number.isFinite(a) && Number.isFinite(e) ? a - e : Infinity;
    if (Number.isFinite(d)) {
      diff2 += d * d;
      ref2 += e * e;
    }
    const abs = Number.isNaN(d) ? Infinity : Math.abs(d);
    if (abs > worstAbs) {
      worstAbs = abs;
      worst = i;
    }
  }
  const error = badActual + badExpected > 0 ? Infinity : ref2 > 0 ? Math.sqrt(diff2 / ref2) : diff2 > 0 ? Infinity : 0;
  const ok = error <= tolerance;
  const where = worst >= 0 ? describeIndex(worst, layout?.shape ?? [actual.length], layout?.axes) : '';
  const lines = [
    `${what}: relative error ${error.toExponential(2)} ${ok ? '<=' : '>'} tolerance ${tolerance.toExponential(2)} ` +
      `(‖out − ref‖ = ${Math.sqrt(diff2).toExponential(3)}, ‖ref‖ = ${Math.sqrt(ref2).toExponential(3)}, ${actual.length} elements)`,
  ];
  if (badActual > 0) lines.push(`  ${badActual} NaN or infinite value(s) in the output`);
  if (badExpected > 0) lines.push(`  ${badExpected} NaN or infinite value(s) in the reference`);
  if (worst >= 0) lines.push(`  worst element ${where} (flat ${worst}): got ${actual[worst]}, expected ${expected[worst]}`);
  return { ok, error, message: lines.join('\n') };
}

const BITS = new Float32Array(1);
const BITS_U32 = new Uint32Array(BITS.buffer);

function f32Bits(v: number): number {
  BITS[0] = v;
  return BITS_U32[0]!;
}

/** Bit-for-bit equality of f32 storage (so -0 differs from 0, and NaN fails); lists the first few differences. */
function compareBitExact(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, layout?: Layout): Comparison {
  if (actual.length !== expected.length) {
    return { ok: false, error: Infinity, message: `${what}: ${actual.length} elements, expected ${expected.length}` };
  }
  const diffs: number[] = [];
  let count = 0;
  for (let i = 0; i < actual.length; i++) {
    const a = actual[i]!;
    const e = expected[i]!;
    if (Number.isNaN(a) || Number.isNaN(e) || f32Bits(a) !== f32Bits(e)) {
      count++;
      if (diffs.length < 5) diffs.push(i);
    }
  }
  const ok = count === 0;
  const lines = [`${what}: ${ok ? 'bit-exact' : `${count} of ${actual.length} elements differ (bit-exact copy expected)`}`];
  for (const i of diffs) {
    lines.push(`  ${describeIndex(i, layout?.shape ?? [actual.length], layout?.axes)} (flat ${i}): got ${actual[i]}, expected ${expected[i]}`);
  }
  return { ok, error: ok ? 0 : Infinity, message: lines.join('\n') };
}

/** What a comparison demands: a relative tolerance, or bit-for-bit equality (copies, untouched rows). */
export type Expectation = number | 'bit-exact';

/** The one comparison the suite makes: relative error within a tolerance, or bit-exact; with a message either way. */
export function compare(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, expectation: Expectation, layout?: Layout): Comparison {
  return expectation === 'bit-exact' ? compareBitExact(what, actual, expected, layout) : compareRelative(what, actual, expected, expectation, layout);
}

/** Throws the comparison's message when it fails: for callers outside the suite's own checks. */
export function expectMatch(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, expectation: Expectation, layout?: Layout): void {
  const c = compare(what, actual, expected, expectation, layout);
  if (!c.ok) throw new Error(c.message);
}

/** Collects comparisons so one failing test reports every output that is off, not only the first. */
export class Checks {
  private readonly failed: string[] = [];

  constructor(private readonly title: string) {}

  add(c: Comparison): void {
    if (!c.ok) this.failed.push(c.message);
  }

  close(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, tolerance: number, layout?: Layout): void {
    this.add(compare(what, actual, expected, tolerance, layout));
  }

  exact(what: string, actual: ArrayLike<number>, expected: ArrayLike<number>, layout?: Layout): void {
    this.add(compare(what, actual, expected, 'bit-exact', layout));
  }

  /** Integers equal one by one (index values: f32 bit patterns would round them). */
  sameIntegers(what: string, actual: readonly number[], expected: readonly number[]): void {
    const bad = expected.findIndex((e, i) => actual[i] !== e);
    this.that(actual.length === expected.length && bad < 0, `${what}: got [${actual.join(', ')}], expected [${expected.join(', ')}]`);
  }

  /** A condition that is not a comparison (an order, a count, a shape). */
  that(ok: boolean, message: string): void {
    if (!ok) this.failed.push(message);
  }

  done(): void {
    if (this.failed.length > 0) throw new Error(`${this.title}\n${this.failed.join('\n')}`);
  }
}
