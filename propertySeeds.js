/**
 * The seeds of every property test in the repository. A plain run (`pnpm test`,
 * CI) checks each property once per fixed seed below, so it fails or passes the
 * same way every time; `KVKIT_PROPERTY_SEED=random` draws fresh seeds
 * (`pnpm test:explore`), `KVKIT_PROPERTY_SEED=<seed>` replays one printed seed,
 * and `KVKIT_PROPERTY_SCALE=<n>` multiplies every property's runs.
 *
 * Plain JavaScript with its types beside it: package tests import it from
 * source, the built @kvkit/conformance from dist and tools/device from its
 * bundle, all as the same module.
 */

/** The seeds of a plain run. A counterexample one of them finds is kept as a fixed case in its suite. */
export const FIXED_PROPERTY_SEEDS = Object.freeze([0x6b766b31, -1640531527, 20260101]);

/** @type {readonly number[] | undefined} */
let seeds;

function env(name) {
  return globalThis.process?.env?.[name];
}

function envInteger(name) {
  const raw = env(name);
  if (raw === undefined || raw === '') return undefined;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name}=${raw} is not an integer`);
  return n;
}

/** The seeds of this run, printed the first time they are asked for. */
export function propertySeeds() {
  if (seeds) return seeds;
  const raw = env('KVKIT_PROPERTY_SEED');
  let how;
  if (raw === undefined || raw === '') {
    seeds = FIXED_PROPERTY_SEEDS;
    how = 'fixed; KVKIT_PROPERTY_SEED=random explores';
  } else if (raw === 'random') {
    seeds = Object.freeze(Array.from(globalThis.crypto.getRandomValues(new Int32Array(FIXED_PROPERTY_SEEDS.length))));
    how = 'fresh';
  } else {
    const seed = Number(raw);
    if (!Number.isSafeInteger(seed) || seed !== (seed | 0)) throw new Error(`KVKIT_PROPERTY_SEED=${raw} is neither 'random' nor a 32-bit integer`);
    seeds = Object.freeze([seed]);
    how = 'replayed';
  }
  console.log(`property seeds ${seeds.join(', ')} (${how}; KVKIT_PROPERTY_SEED=<seed> replays one), runs ×${runScale()}`);
  return seeds;
}

/** Every property's runs are multiplied by KVKIT_PROPERTY_SCALE (default 1): a GPU host affords more. */
export function runScale() {
  const scale = envInteger('KVKIT_PROPERTY_SCALE') ?? 1;
  if (scale < 1) throw new Error(`KVKIT_PROPERTY_SCALE=${scale} must be at least 1`);
  return scale;
}

/**
 * fast-check runs under each seed for a property a suite runs `runs` times:
 * shared out over the fixed seeds, so a plain run costs what one seed did, and
 * the same under a replayed seed, which then retraces the run that failed.
 */
export function runsPerSeed(runs) {
  return Math.max(1, Math.ceil(runs / FIXED_PROPERTY_SEEDS.length)) * runScale();
}

/** The line that replays a run under `seed`. */
export function replayHint(seed) {
  return `replay: KVKIT_PROPERTY_SEED=${seed}`;
}

/**
 * Runs `check` once per seed of this run, with fast-check's `seed` and
 * `numRuns`; a failure stops there, its message ending with the line that
 * replays that seed.
 */
export async function forEverySeed(runs, check) {
  const numRuns = runsPerSeed(runs);
  for (const seed of propertySeeds()) {
    try {
      await check({ seed, numRuns });
    } catch (e) {
      if (e instanceof Error) e.message += `\n${replayHint(seed)}`;
      throw e;
    }
  }
}
