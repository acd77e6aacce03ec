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
