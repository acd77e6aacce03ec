/** Types of propertySeeds.js, the seed policy of every property test. */

export declare const FIXED_PROPERTY_SEEDS: readonly number[];

export declare function propertySeeds(): readonly number[];

export declare function runScale(): number;

export declare function runsPerSeed(runs: number): number;

export declare function replayHint(seed: number): string;

export declare function forEverySeed(runs: number, check: (parameters: { readonly seed: number; readonly numRuns: number }) => unknown): Promise<void>;
