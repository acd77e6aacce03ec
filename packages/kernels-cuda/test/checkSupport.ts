/**
 * What the device-bundled checks (cudaChecks.ts, largePools.ts) share. Kept
 * apart from helpers.ts, which probes for nvcc and a GPU as it loads.
 */
import type { Backend, Tensor } from '@kvkit/contracts';
import { tuning } from '../src/profiling.js';

/** The ops the checks call with hand-built arguments, typed loosely. */
type Untyped = {
  createKvMaterializer(a: unknown): { materialize(a: unknown): void; materializeInto(a: unknown): void; dispose(): void };
  ropePoolFused(a: unknown): { qRot: Tensor; kRot: Tensor };
  fusedNormRopeStacked(a: unknown): { kOut: Tensor; vOut: Tensor };
};
export const untyped = (b: Backend) => b as unknown as Untyped;

/** n values in [-scale, scale) from a 32-bit LCG (an exact 0 becomes 0.5); the same seed gives the same values. */
export function values(n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1 || 0.5) * scale;
  }
  return out;
}

/** Runs `body` with the materializer's tuning set to `settings` (at any token count unless they say), as it was after. */
export async function withTuning<R>(settings: Partial<typeof tuning>, body: () => Promise<R>): Promise<R> {
  const before = { ...tuning };
  Object.assign(tuning, { overlapMinTokens: 0, ...settings });
  try {
    return await body();
  } finally {
    Object.assign(tuning, before);
  }
}
