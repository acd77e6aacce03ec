/**
 * One decoding step of a small model, as the page runs it and as the test
 * replays it on the CPU reference: the sizes, the seeds of every random
 * array, the positions and slots, and where the engine's tensors sit inside
 * its buffers. Both sides import this module, so they agree by construction.
 */
export const SCENARIO = {
  tokens: 5,
  hidden: 24,
  numQoHeads: 4,
  numKvHeads: 2,
  headDim: 16,
  /** Partial rotary: the last 4 elements of each head pass through. */
  rotaryDim: 12,
  ropeStyle: 'neox',
  ropeBase: 10000,
  slotsInCache: 7,
  positions: [3, 0, 41, 4, 9],
  /** Token 1 is not written (-1); tokens 0 and 3 contest slot 2, and the last of them writes it. */
  slots: [2, -1, 5, 2, 0],
  seeds: { hidden: 0x51ab, weight: 0x7e11, kCache: 0xc0de, vCache: 0xbeef },
  /**
   * Byte offsets of the tensors inside the engine's buffers: element-aligned,
   * never a multiple of 256, so kvkit cannot lean on binding offsets.
   */
  byteOffsets: { qkv: 12, kCache: 0, vCache: 4, positions: 8, slots: 4 },
} as const;

/** Columns of the fused projection: every query head, then the K heads, then the V heads. */
export const QKV_WIDTH = (SCENARIO.numQoHeads + 2 * SCENARIO.numKvHeads) * SCENARIO.headDim;

/** Elements of one K or V cache: `[S, H, D]`. */
export const CACHE_ELEMENTS = SCENARIO.slotsInCache * SCENARIO.numKvHeads * SCENARIO.headDim;

/**
 * `count` floats in [-1, 1) from a 32-bit xorshift generator, each exactly
 * representable in f32 (24 random bits), so the page's Float32Array and
 * the test's numbers hold the same values.
 */
export function randomFloats(seed: number, count: number): Float32Array {
  let state = seed >>> 0 || 1;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    state ^= state << 13;
    state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5;
    state >>>= 0;
    out[i] = (state >>> 8) / 2 ** 23 - 1;
  }
  return out;
}

/** What the page reports on `window.engineStep`: every array as the f32 (or i32) bits it read back. */
export interface EngineStepReport {
  readonly ok: true;
  readonly adapter: string;
  readonly backend: string;
  /** What `gpuBufferOf` says of the tensors kvkit worked on: the engine's buffer, byte offset, strides in elements. */
  readonly views: readonly { readonly name: string; readonly inEngineBuffer: boolean; readonly byteOffset: number; readonly strides: readonly number[] }[];
  /** Command buffers kvkit submitted during the `ropePoolFused` call: its work on the engine's buffers goes before it returns. */
  readonly submitsByCall: number;
  /** The engine's own projection `[N, (Hq + 2H) * D]`, as its WGSL wrote it. */
  readonly qkvBits: number[];
  readonly qRotBits: number[];
  readonly kRotBits: number[];
  /** The engine's caches `[S, H, D]` after the step. */
  readonly kCacheBits: number[];
  readonly vCacheBits: number[];
}

export interface EngineStepFailure {
  readonly ok: false;
  readonly error: string;
  readonly code?: string;
}

export type EngineStepResult = EngineStepReport | EngineStepFailure;
