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

/** Attention over a KV pool: B requests of kvLen cached tokens each (their new tokens among them), Hq query heads over H KV heads. */
export interface PagedShape {
  readonly B: number;
  readonly kvLen: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
}

/** copySlots: M slot pairs of H heads of D. */
export interface CopySlotsShape {
  readonly M: number;
  readonly H: number;
  readonly D: number;
}

/** The pagedAttention and copySlots rows, bf16: all of them read the same pools, of as many slots as the largest row needs. */
export interface PagedPlan {
  /** Decode, one query a request; the pool variants, scattered slots and verification run on the same requests. */
  readonly decode: PagedShape;
  /** One request of a long context, one query. */
  readonly long: PagedShape;
  /** Queries a request in the verification row: the draft tokens speculative decoding checks in one call. */
  readonly verifyQueries: number;
  /** copySlots rows, out of the same pools. */
  readonly copySlots: readonly CopySlotsShape[];
}

/** Llama-8B-like heads: 64 requests of 4096 tokens, one of 131072, 8 draft tokens; copies of 4096 and 32768 slots. */
export const pagedPlan: PagedPlan = {
  decode: { B: 64, kvLen: 4096, Hq: 32, H: 8, D: 128 },
  long: { B: 1, kvLen: 131072, Hq: 32, H: 8, D: 128 },
  verifyQueries: 8,
  copySlots: [4096, 32768].map((M) => ({ M, H: 8, D: 128 })),
};

/** mlaPoolFused: N tokens' latent rows (C + R) into a one-head pool, and Hq query heads of Dq values (the last R rotated). */
export interface MlaShape {
  readonly N: number;
  readonly C: number;
  readonly R: number;
  readonly Hq: number;
  readonly Dq: number;
}

/** DeepSeek-V3 and Kimi K2 on one rank of eight: kv_lora_rank 512, qk_rope_head_dim 64, 128 / 8 query heads of 128 + 64. */
export const mlaPoolShapes: readonly MlaShape[] = [4096, 32768].map((N) => ({ N, C: 512, R: 64, Hq: 16, Dq: 192 }));

/** Everything a run measures; the bench runs `benchPlan`, tests a plan of small shapes. */
export interface BenchPlan {
  readonly normRope: readonly NormRopeShape[];
  readonly ropePool: readonly RopePoolShape[];
  readonly materialize: readonly MaterializeShape[];
  /** T (or N) from which the throughput targets apply, and the op variants, scaled RoPE and materializeInto rows are run. */
  readonly longTokens: number;
  /**
   * The shapes f16 and f32 run (plain rows only: one row of each op a dtype, no variants or op-made outputs); where
   * omitted, every dtype runs everything bf16 does that is not bf16-only.
   */
  readonly otherDtypes?: { readonly normRope: readonly NormRopeShape[]; readonly ropePool: readonly RopePoolShape[] };
  /** The pagedAttention and copySlots rows; none where omitted. */
  readonly paged?: PagedPlan;
  /** The mlaPoolFused rows (bf16, into bf16 and fp8e4m3 pools); none where omitted. */
  readonly mlaPool?: readonly MlaShape[];
}

export const benchPlan: BenchPlan = {
  normRope: normRopeShapes,
  ropePool: ropePoolShapes,
  materialize: materializeShapes,
  longTokens: 4096,
  otherDtypes: { normRope: [{ L: 5, H: 8, D: 128, R: 128, T: 4096 }], ropePool: [{ N: 4096, Hq: 32, H: 8, D: 128, R: 128 }] },
  paged: pagedPlan,
  mlaPool: mlaPoolShapes,
};

/** The angles of a ropePoolFused call: base (theta), then the scaled-RoPE options as the op takes them. */
export interface RopeConfig {
  readonly ropeBase: number;
  readonly ropeScaling?: RopeScaling;
  readonly angles?: RopeAngleMode;
  /** mRoPE: positions are [3, N] streams, these rotary pairs each. */
  readonly mropeSection?: readonly [number, number, number];
  /** mRoPE's interleaved layout of the section (Qwen3-VL). */
  readonly mropeInterleaved?: boolean;
}

/** LongRoPE factors at R = 128 in the shape Phi-3's have: short ones just above 1, long ones rising to 48. */
const longropeFactors = (top: number, power: number) => Array.from({ length: 64 }, (_, j) => 1 + (top - 1) * (j / 63) ** power);

/** Plain RoPE as the unscaled ropePoolFused rows run it. */
export const PLAIN_ROPE: RopeConfig = { ropeBase: 10000 };

/**
 * RoPE as released checkpoints configure it (their config.json), at R = 128,
 * each read against plain RoPE of the same shape: Llama 3.1 8B's llama3
 * rescaling, Qwen2.5-7B-Instruct's YaRN (factor 4 over 32768), the float32
 * angle convention of transformers, vLLM and SGLang, Qwen2-VL-7B's mRoPE,
 * Qwen3-VL's interleaved mRoPE and Phi-3's LongRoPE.
 */
export const scaledRope: readonly (readonly [string, RopeConfig])[] = [
  ['llama3', { ropeBase: 500000, ropeScaling: { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 } }],
  ['yarn', { ropeBase: 1000000, ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 32768 } }],
  ['float32 angles', { ropeBase: 10000, angles: 'float32' }],
  ['mrope', { ropeBase: 1000000, mropeSection: [16, 24, 24] }],
  // Qwen3-VL-8B's interleaved mRoPE (rope_theta 5e6), and Phi-3-mini-128k's LongRoPE (factor 131072 / 4096: the long factors).
  ['mrope interleaved', { ropeBase: 5000000, mropeSection: [24, 20, 20], mropeInterleaved: true }],
  ['longrope', { ropeBase: 10000, ropeScaling: { type: 'longrope', shortFactor: longropeFactors(1.06, 2), longFactor: longropeFactors(48, 3), originalMaxPositions: 4096, factor: 32 } }],
];
