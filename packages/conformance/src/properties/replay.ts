import fc from 'fast-check';
import { seedOf } from '../data.js';

/**
 * Seeds and run counts of the property suites. One suite seed (from
 * KVKIT_PROPERTY_SEED, else random) fixes every property's runs, so the line
 * printed at the start of a suite, or in a failure, replays it exactly.
 */

function env(name: string): string | undefined {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.[name];
}

function envInteger(name: string): number | undefined {
  const raw = env(name);
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${raw} is not an integer`);
  return n;
}

/** The seed every property of a suite derives its own from. */
export function suiteSeed(): number {
  return (envInteger('KVKIT_PROPERTY_SEED') ?? Math.floor(Math.random() * 2 ** 31)) | 0;
}

/** Every property's run count is multiplied by KVKIT_PROPERTY_SCALE (default 1): a GPU host affords more. */
export function runScale(): number {
  const scale = envInteger('KVKIT_PROPERTY_SCALE') ?? 1;
  if (scale < 1) throw new Error(`KVKIT_PROPERTY_SCALE=${scale} must be at least 1`);
  return scale;
}

export interface PropertyRun {
  /** The suite seed: KVKIT_PROPERTY_SEED=<this> replays the run. */
  readonly seed: number;
  readonly runs: number;
}

/**
 * Checks `predicate` on `runs` values of `arbitrary` with a seed derived from
 * the suite seed and the property's name (so properties do not depend on one
 * another's order), and throws one message with the counterexample, fast-check's
 * seed and path, and the variable that replays it.
 */
export async function checkProperty<T>(name: string, run: PropertyRun, arbitrary: fc.Arbitrary<T>, predicate: (value: T) => Promise<void>): Promise<void> {
  const seed = (run.seed ^ seedOf(name)) | 0;
  const details = await fc.check(fc.asyncProperty(arbitrary, predicate), { numRuns: run.runs, seed });
  if (!details.failed) return;
  const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  throw new Error(
    [
      `property "${name}" failed after ${details.numRuns} run(s) and ${details.numShrinks} shrink(s): ${cause}`,
      `  counterexample: ${fc.stringify(details.counterexample)}`,
      `  fast-check seed ${details.seed}, path "${details.counterexamplePath ?? ''}"`,
      `  replay: KVKIT_PROPERTY_SEED=${run.seed}`,
    ].join('\n'),
  );
}
