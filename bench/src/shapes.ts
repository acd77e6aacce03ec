import type { RopeAngleMode, RopeScaling } from '@kvkit/contracts';

/** The shapes every backend is measured on (bf16, as served), from the benchmark plan. */
export interface NormRopeShape {
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly T: number;
}

export interface RopePoolShape {
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
}

export interface MaterializeShape extends NormRopeShape {
  readonly hidden: number;
}

export const TOKENS = [16, 256, 4096, 32768] as const;

/** L ∈ {1, 5}, H = 8, D = 128, R ∈ {128, 64}, plus the small-head model (H = 4, D = 64, R = 32). */
const MODELS: readonly Omit<NormRopeShape, 'T'>[] = [
  { L: 5, H: 8, D: 128, R: 128 },
  { L: 5, H: 8, D: 128, R: 64 },
  { L: 1, H: 8, D: 128, R: 128 },
  { L: 1, H: 8, D: 128, R: 64 },
  { L: 5, H: 4, D: 64, R: 32 },
];

export const normRopeShapes: readonly NormRopeShape[] = MODELS.flatMap((m) => TOKENS.map((T) => ({ ...m, T })));

/** A Llama-8B-like attention: 32 query heads over 8 KV heads. */
export const ropePoolShapes: readonly RopePoolShape[] = [128, 64].flatMap((R) => TOKENS.map((N) => ({ N, Hq: 32, H: 8, D: 128, R })));

/** The draft model of the plan's peer measurement: hidden 4096, all five layers' K and V in one 4096×10240 projection. */
export const materializeShapes: readonly MaterializeShape[] = TOKENS.map((T) => ({ L: 5, H: 8, D: 128, R: 128, T, hidden: 4096 }));

/** Everything a run measures; the bench runs `benchPlan`, tests a plan of small shapes. */
export interface BenchPlan {
  readonly normRope: readonly NormRopeShape[];
  readonly ropePool: readonly RopePoolShape[];
  readonly materialize: readonly MaterializeShape[];
  /** T (or N) from which the throughput targets apply, and the op variants, scaled RoPE and materializeInto rows are run. */
  readonly longTokens: number;
}

export const benchPlan: BenchPlan = { normRope: normRopeShapes, ropePool: ropePoolShapes, materialize: materializeShapes, longTokens: 4096 };

/** The angles of a ropePoolFused call: base (theta), then the scaled-RoPE options as the op takes them. */
export interface RopeConfig {
  readonly ropeBase: number;
  readonly ropeScaling?: RopeScaling;
  readonly angles?: RopeAngleMode;
  /** mRoPE: positions are [3, N] streams, these rotary pairs each. */
  readonly mropeSection?: readonly [number, number, number];
}

/** Plain RoPE as the unscaled ropePoolFused rows run it. */
export const PLAIN_ROPE: RopeConfig = { ropeBase: 10000 };

/**
 * RoPE as released checkpoints configure it (their config.json), at R = 128,
 * each read against plain RoPE of the same shape: Llama 3.1 8B's llama3
 * rescaling, Qwen2.5-7B-Instruct's YaRN (factor 4 over 32768), the float32
 * angle convention of transformers, vLLM and SGLang, and Qwen2-VL-7B's mRoPE.
 */
export const scaledRope: readonly (readonly [string, RopeConfig])[] = [
  ['llama3', { ropeBase: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } }],
  ['yarn', { ropeBase: 1000000, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } }],
  ['float32 angles', { ropeBase: 10000, angles: 'float32' }],
  ['mrope', { ropeBase: 1000000, mropeSection: [16, 24, 24] }],
];
