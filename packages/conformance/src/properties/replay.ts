import fc from 'fast-check';
import { forEverySeed } from '../../../../propertySeeds.js';
import { seedOf } from '../data.js';

/**
 * Checks `predicate` on values of `arbitrary`, `runs` of them a suite shared
 * out over the run's seeds (the repository's seed policy, propertySeeds.js).
 * Each property's fast-check seed is the run's seed mixed with its name, so
 * properties do not depend on one another's order or repeat one another's
 * values; a failure throws one message with the counterexample, fast-check's
 * seed and path, and the variable that replays it.
 */
export function checkProperty<T>(name: string, runs: number, arbitrary: fc.Arbitrary<T>, predicate: (value: T) => Promise<void>): Promise<void> {
  return forEverySeed(runs, async ({ seed, numRuns }) => {
    const details = await fc.check(fc.asyncProperty(arbitrary, predicate), { numRuns, seed: (seed ^ seedOf(name)) | 0 });
    if (!details.failed) return;
    const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
    throw new Error(
      [
        `property "${name}" failed after ${details.numRuns} run(s) and ${details.numShrinks} shrink(s): ${cause}`,
        `  counterexample: ${fc.stringify(details.counterexample)}`,
        `  fast-check seed ${details.seed}, path "${details.counterexamplePath ?? ''}"`,
      ].join('\n'),
    );
  });
}
