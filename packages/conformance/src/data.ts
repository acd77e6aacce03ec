import type { FloatDType } from '@kvkit/contracts';
import { ropeAngles, roundToBf16, roundToF16, writeCosSinRows } from '@kvkit/contracts/backend';

/**
 * Deterministic test data: a small seeded PRNG, random values that are never
 * zero, cos/sin caches in f64 as SEMANTICS.md defines them, positions and
 * slots, and the values a tensor of each float dtype holds.
 */

/** mulberry32: tiny, fast and good enough for test data; the same seed gives the same numbers everywhere. */
export class Rng {
  private state: number;

  constructor(seed: number) {
    this.state = seed >>> 0;
  }

  /** Uniform in [0, 1). */
  next(): number {
    this.state = (this.state + 0x6d2b79f5) >>> 0;
    let t = this.state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  /** Uniform integer in [0, n). */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }

  /** A fresh array with the elements of `items` in random order. */
  shuffle<T>(items: readonly T[]): T[] {
    const out = [...items];
    for (let i = out.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [out[i], out[j]] = [out[j]!, out[i]!];
    }
    return out;
  }
}

/** FNV-1a of a string: a seed per case name, so a case's data does not depend on which cases ran before it. */
export function seedOf(name: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < name.length; i++) {
    h ^= name.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}

/** Values with |x| in [min, max) and a random sign: never zero, so a kernel that writes nothing cannot pass. */
export function randomValues(rng: Rng, n: number, min = 0.125, max = 1): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    const magnitude = min + (max - min) * rng.next();
    out[i] = rng.next() < 0.5 ? -magnitude : magnitude;
  }
  return out;
}

/** Positive values in [min, max): RMSNorm weights near 1. */
export function randomPositive(rng: Rng, n: number, min = 0.5, max = 1.5): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = min + (max - min) * rng.next();
  return out;
}

/**
 * A recognisable fill for outputs and pools, far from anything an op makes of
 * random data, and exact in f32, f16 and bf16 (multiples of 4 in [512, 756]).
 */
export function patternValues(n: number, offset = 0): Float32Array {
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = -(512 + 4 * ((i + offset) % 61));
  return out;
}

/** Per-layer epsilons of different sizes, so a kernel that reads the wrong layer's eps is seen. */
export function epsPerLayer(L: number): Float32Array {
  const choices = [1e-6, 1e-5, 1e-3, 1e-2];
  return Float32Array.from({ length: L }, (_, l) => choices[l % choices.length]!);
}

/** `[P, R]` cache in f64: row p is cos(p*f_0..f_{R/2-1}) then sin(p*f_0..f_{R/2-1}), f from the backend layer. */
export function buildCosSinCache(rows: number, rotaryDim: number, ropeBase: number): Float64Array {
  const out = new Float64Array(rows * rotaryDim);
  writeCosSinRows(out, 0, rows, ropeAngles({ ropeBase, rotaryDim }));
  return out;
}

/**
 * `count` distinct positions in [0, rows), shuffled. When there is room the
 * first and last rows are among them: off-by-one reads show at the ends.
 */
export function distinctPositions(rng: Rng, count: number, rows: number): number[] {
  if (count > rows) throw new Error(`cannot pick ${count} distinct positions from ${rows} rows`);
  const all = rng.shuffle(Array.from({ length: rows }, (_, p) => p));
  const picked = new Set<number>();
  if (count >= 1) picked.add(rows - 1);
  if (count >= 2) picked.add(0);
  for (const p of all) {
    if (picked.size >= count) break;
    picked.add(p);
  }
  return rng.shuffle([...picked]);
}

/** Negative slots of different sizes: every negative value means "skip", not only -1. */
const NEGATIVE_SLOTS = [-1, -2147483648, -7, -2, -1000];

/**
 * `count` distinct slots of a pool of `poolSlots` rows, with `negatives` of
 * them (spread over the tokens) replaced by negative values.
 */
export function slotPermutation(rng: Rng, count: number, poolSlots: number, negatives: number): number[] {
  if (count > poolSlots) throw new Error(`cannot pick ${count} distinct slots from ${poolSlots}`);
  const slots = rng.shuffle(Array.from({ length: poolSlots }, (_, s) => s)).slice(0, count);
  const which = rng.shuffle(Array.from({ length: count }, (_, t) => t)).slice(0, Math.min(negatives, count));
  which.forEach((t, i) => {
    slots[t] = NEGATIVE_SLOTS[i % NEGATIVE_SLOTS.length]!;
  });
  return slots;
}

/** Each value rounded once to `dtype` (f32: to the nearest f32). */
export function roundToDType(values: ArrayLike<number>, dtype: FloatDType): Float32Array {
  const round = dtype === 'f16' ? roundToF16 : dtype === 'bf16' ? roundToBf16 : Math.fround;
  return Float32Array.from(values, (v) => round(v));
}
