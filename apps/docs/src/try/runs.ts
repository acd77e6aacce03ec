import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { ropeCosSinCache } from '@kvkit/contracts';

/** The shapes the reader sets; anything kvkit rejects in them is the call's own ContractError. */
export interface TryDims {
  readonly tokens: number;
  readonly layers: number;
  readonly numQoHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  readonly dtype: FloatDType;
}

/** One op set up on one backend: its inputs made, ready to call. */
export interface PreparedRun {
  /** One call, its outputs read back as f32 values, by name. */
  result(): Promise<Record<string, Float32Array>>;
  /** One more call with nothing kept: what the timing repeats. */
  enqueue(): void;
  /** Frees every tensor the run made. */
  dispose(): void;
}

/** A deliberately wrong call of an op. */
export interface Mistake {
  /** What is wrong, in a few words, as the button says it. */
  readonly label: string;
  /** The wrong call; a value error on a GPU backend surfaces at `await backend.sync()`, which the caller awaits next. */
  call(b: Backend, d: TryDims, seed: number): void;
}

/** What the page runs for one op: `op` is its declaration's name (its docs page), `method` what `backend.ops` lists. */
export interface OpRun {
  readonly op: string;
  readonly method: Backend['ops'][number];
  /** Positions the run reads, for the RoPE tolerance (angles from ropeBase). */
  maxPosition(d: TryDims): number;
  /** What the page's random inputs are, in a sentence. */
  describe(d: TryDims): string;
  prepare(b: Backend, d: TryDims, seed: number): PreparedRun;
  readonly mistake: Mistake;
}

/** Deterministic inputs: the same seed and name give the same values on every backend. */
function uniform(seed: number, name: string, count: number, lo = -1, hi = 1): Float32Array {
  let h = seed >>> 0;
  for (let i = 0; i < name.length; i++) h = Math.imul(h ^ name.charCodeAt(i), 0x9e3779b1) >>> 0;
  const out = new Float32Array(count);
  for (let i = 0; i < count; i++) {
    // mulberry32
    h = (h + 0x6d2b79f5) >>> 0;
    let t = h;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    out[i] = lo + (hi - lo) * (((t ^ (t >>> 14)) >>> 0) / 2 ** 32);
  }
  return out;
}

/** A permutation of `[0, n)` from the seed: slots scattered over the pool, as an engine's allocator leaves them. */
function shuffled(seed: number, name: string, n: number): number[] {
  const r = uniform(seed, name, n, 0, 1);
  const out = Array.from({ length: n }, (_, i) => i);
  for (let i = n - 1; i > 0; i--) {
    const j = Math.floor(r[i]! * (i + 1));
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

const count = (shape: readonly number[]) => shape.reduce((a, b) => a * b, 1);
/** Shapes the reader can break: an invalid one is tensor()'s KV040. */
const size = (shape: readonly number[]) => (shape.every((s) => Number.isInteger(s) && s >= 0) ? count(shape) : 0);

/** Tensors a run makes, kept so that it can free them all. */
class Made {
  readonly all: Tensor[] = [];
  constructor(
    readonly b: Backend,
    readonly seed: number,
  ) {}
  keep<T extends Tensor>(t: T): T {
    this.all.push(t);
    return t;
  }
  random(dtype: FloatDType | 'fp8e4m3', name: string, shape: readonly number[], lo = -1, hi = 1): Tensor {
    return this.keep(this.b.tensor(dtype, shape, uniform(this.seed, name, size(shape), lo, hi)) as Tensor);
  }
  ints(values: readonly number[]): Tensor<'i32'> {
    return this.keep(this.b.tensor('i32', [values.length], values) as Tensor<'i32'>);
  }
  dispose(): void {
    for (const t of this.all.splice(0)) t.dispose();
  }
}

const ROPE_BASE = 10000;
const EPS = 1e-6;
/** The new tokens sit after this many cached ones: positions start here. */
const FIRST_POSITION = 100;
/** Cached tokens before each attention request's new ones. */
const PREFIX = 10;
/** Width of the draft model's hidden state the materializer projects from. */
const HIDDEN = 64;

const positionsOf = (d: TryDims) => Array.from({ length: Math.max(0, d.tokens) }, (_, t) => FIRST_POSITION + t);
/** Pool slots: twice the tokens, so the written ones lie among rows left as they were. */
const poolSlots = (d: TryDims) => 2 * Math.max(1, d.tokens);

async function readAll(b: Backend, tensors: Record<string, Tensor>): Promise<Record<string, Float32Array>> {
  const out: Record<string, Float32Array> = {};
  for (const [name, t] of Object.entries(tensors)) out[name] = (await b.read(t)) as Float32Array;
  return out;
}

// `as never`: the dims are the reader's numbers, checked by the op at run time, as any call with `number` dims is.
const fusedNormRopeStacked: OpRun = {
  op: 'fusedNormRopeStacked',
  method: 'fusedNormRopeStacked',
  maxPosition: (d) => FIRST_POSITION + d.tokens - 1,
  describe: (d) =>
    `kv [T, L, 2·H·D] = [${d.tokens}, ${d.layers}, 2·${d.numKvHeads}·${d.headDim}] of ${d.dtype} values in [-1, 1), norm weights in [0.5, 1.5), a cos/sin cache from ropeBase ${ROPE_BASE} (ropeCosSinCache), positions ${FIRST_POSITION}–${FIRST_POSITION + d.tokens - 1}.`,
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const { tokens: T, layers: L, numKvHeads: H, headDim: D, dtype } = d;
    const args = {
      kv: m.random(dtype, 'kv', [T, L, 2 * H * D]),
      kNormWeight: m.random('f32', 'kNormWeight', [L, D], 0.5, 1.5),
      eps: m.keep(b.tensor('f32', [L], new Array(Math.max(0, L)).fill(EPS))),
      cosSinCache: m.keep(ropeCosSinCache(b, { rotaryDim: D, ropeBase: ROPE_BASE, positions: FIRST_POSITION + T, dtype: 'f32' })),
      positions: m.ints(positionsOf(d)),
      numKvHeads: H,
      headDim: D,
      rotaryDim: D,
    };
    const kOut = m.keep(b.empty(dtype, [L, T, H, D]));
    const vOut = m.keep(b.empty(dtype, [L, T, H, D]));
    return {
      async result() {
        b.fusedNormRopeStacked({ ...args, kOut, vOut } as never);
        return readAll(b, { kOut, vOut });
      },
      enqueue: () => b.fusedNormRopeStacked({ ...args, kOut, vOut } as never),
      dispose: () => m.dispose(),
    };
  },
  mistake: {
    label: 'one KV head too many',
    call(b, d, seed) {
      const m = new Made(b, seed);
      try {
        const { tokens: T, layers: L, numKvHeads: H, headDim: D, dtype } = d;
        b.fusedNormRopeStacked({
          kv: m.random(dtype, 'kv', [T, L, 2 * H * D]),
          kNormWeight: m.random('f32', 'kNormWeight', [L, D], 0.5, 1.5),
          eps: m.keep(b.tensor('f32', [L], new Array(Math.max(0, L)).fill(EPS))),
          cosSinCache: m.keep(ropeCosSinCache(b, { rotaryDim: D, ropeBase: ROPE_BASE, positions: FIRST_POSITION + T })),
          positions: m.ints(positionsOf(d)),
          numKvHeads: H + 1,
          headDim: D,
          rotaryDim: D,
        } as never);
      } finally {
        m.dispose();
      }
    },
  },
};

/** ropePoolFused's inputs: q, k, v of the new tokens, their positions and slots, and the pools they are written into. */
function ropePoolInputs(m: Made, d: TryDims) {
  const { tokens: N, numQoHeads: Hq, numKvHeads: H, headDim: D, dtype } = d;
  const S = poolSlots(d);
  return {
    q: m.random(dtype, 'q', [N, Hq, D]),
    k: m.random(dtype, 'k', [N, H, D]),
    v: m.random(dtype, 'v', [N, H, D]),
    positions: m.ints(positionsOf(d)),
    slots: m.ints(shuffled(m.seed, 'slots', S).slice(0, Math.max(0, N))),
    kPool: m.random(dtype, 'kPool', [S, H, D]),
    vPool: m.random(dtype, 'vPool', [S, H, D]),
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    ropeBase: ROPE_BASE,
  };
}

const ropePoolFused: OpRun = {
  op: 'ropePoolFused',
  method: 'ropePoolFused',
  maxPosition: (d) => FIRST_POSITION + d.tokens - 1,
  describe: (d) =>
    `q [N, Hq, D] = [${d.tokens}, ${d.numQoHeads}, ${d.headDim}], k and v [${d.tokens}, ${d.numKvHeads}, ${d.headDim}] of ${d.dtype} values in [-1, 1), ropeBase ${ROPE_BASE}, positions ${FIRST_POSITION}–${FIRST_POSITION + d.tokens - 1}, written at shuffled slots of [S, H, D] pools with S = ${poolSlots(d)} (filled with random rows first).`,
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const args = ropePoolInputs(m, d);
    return {
      async result() {
        const { qRot, kRot } = b.ropePoolFused(args as never) as { qRot: Tensor; kRot: Tensor };
        m.keep(qRot);
        m.keep(kRot);
        return readAll(b, { qRot, kRot, kPool: args.kPool, vPool: args.vPool });
      },
      enqueue() {
        const { qRot, kRot } = b.ropePoolFused(args as never) as { qRot: Tensor; kRot: Tensor };
        qRot.dispose();
        kRot.dispose();
      },
      dispose: () => m.dispose(),
    };
  },
  mistake: {
    label: 'a slot past the end of the pool',
    call(b, d, seed) {
      const m = new Made(b, seed);
      try {
        const args = ropePoolInputs(m, d);
        const slots = shuffled(seed, 'slots', poolSlots(d)).slice(0, Math.max(0, d.tokens));
        slots[slots.length - 1] = poolSlots(d);
        const { qRot, kRot } = b.ropePoolFused({ ...args, slots: m.ints(slots) } as never) as { qRot: Tensor; kRot: Tensor };
        m.keep(qRot);
        m.keep(kRot);
      } finally {
        m.dispose();
      }
    },
  },
};

/** An fp8 pool of random values with per-head scales, and the slots to read from it. */
function dequantizeInputs(m: Made, d: TryDims) {
  const { numKvHeads: H, headDim: D } = d;
  const S = poolSlots(d);
  return {
    pool: m.random('fp8e4m3', 'pool', [S, H, D], -8, 8),
    scale: m.random('f32', 'scale', [H], 0.5, 2),
    slots: m.ints(shuffled(m.seed, 'slots', S).slice(0, Math.max(0, d.tokens))),
  };
}

const dequantizeKv: OpRun = {
  op: 'dequantizeKv',
  method: 'dequantizeKv',
  maxPosition: () => 0,
  describe: (d) =>
    `an fp8e4m3 pool [S, H, D] = [${poolSlots(d)}, ${d.numKvHeads}, ${d.headDim}] of values in [-8, 8), per-head scales in [0.5, 2), ${d.tokens} shuffled slots read into ${d.dtype} rows [N, H, D].`,
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const args = dequantizeInputs(m, d);
    const rows = m.keep(b.empty(d.dtype, [d.tokens, d.numKvHeads, d.headDim]));
    return {
      async result() {
        b.dequantizeKv({ ...args, rows } as never);
        return readAll(b, { rows });
      },
      enqueue: () => b.dequantizeKv({ ...args, rows } as never),
      dispose: () => m.dispose(),
    };
  },
  mistake: {
    label: "an fp8 pool read without its scale",
    call(b, d, seed) {
      const m = new Made(b, seed);
      try {
        const { pool, slots } = dequantizeInputs(m, d);
        b.dequantizeKv({ pool, slots, rows: m.keep(b.empty(d.dtype, [d.tokens, d.numKvHeads, d.headDim])) } as never);
      } finally {
        m.dispose();
      }
    },
  },
};

/** A materializer over random weights, and what materializeInto takes: the context's hidden states, positions, slots and `[L, S, H, D]` pools. */
function materializerInputs(m: Made, d: TryDims) {
  const { tokens: T, layers: L, numKvHeads: H, headDim: D, dtype } = d;
  const S = poolSlots(d);
  const materializer = m.b.createKvMaterializer({
    // 1/sqrt(hidden) keeps the projection's values near 1, as a trained layer's are.
    kvWeight: m.random(dtype, 'kvWeight', [L, 2 * H * D, HIDDEN], -1 / Math.sqrt(HIDDEN), 1 / Math.sqrt(HIDDEN)),
    kNormWeight: m.random('f32', 'kNormWeight', [L, D], 0.5, 1.5),
    eps: EPS,
    numKvHeads: H,
    headDim: D,
    ropeBase: ROPE_BASE,
    maxPositionHint: FIRST_POSITION + T,
  } as never) as { materializeInto(args: unknown): void; dispose(): void };
  return {
    materializer,
    ctxHidden: m.random(dtype, 'ctxHidden', [T, HIDDEN]),
    positions: m.ints(positionsOf(d)),
    slots: m.ints(shuffled(m.seed, 'slots', S).slice(0, Math.max(0, T))),
    kPool: m.random(dtype, 'kPool', [L, S, H, D]),
    vPool: m.random(dtype, 'vPool', [L, S, H, D]),
  };
}

const materializeInto: OpRun = {
  op: 'KvMaterializer.materializeInto',
  method: 'createKvMaterializer',
  maxPosition: (d) => FIRST_POSITION + d.tokens - 1,
  describe: (d) =>
    `a materializer over random ${d.dtype} weights [L, 2·H·D, hidden] = [${d.layers}, 2·${d.numKvHeads}·${d.headDim}, ${HIDDEN}] (ropeBase ${ROPE_BASE}); ${d.tokens} context tokens' hidden states [T, ${HIDDEN}] projected, normed, rotated and written at shuffled slots of [L, S, H, D] pools with S = ${poolSlots(d)}.`,
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const { materializer, ...args } = materializerInputs(m, d);
    return {
      async result() {
        materializer.materializeInto(args);
        return readAll(b, { kPool: args.kPool, vPool: args.vPool });
      },
      enqueue: () => materializer.materializeInto(args),
      dispose() {
        materializer.dispose();
        m.dispose();
      },
    };
  },
  mistake: {
    label: 'one position fewer than tokens',
    call(b, d, seed) {
      const m = new Made(b, seed);
      const { materializer, ...args } = materializerInputs(m, d);
      try {
        materializer.materializeInto({ ...args, positions: m.ints(positionsOf(d).slice(1)) });
      } finally {
        materializer.dispose();
        m.dispose();
      }
    },
  },
};

/** Two requests over one pool: the first with every new token's cache before it (prefill after a prefix), the second decoding one token. */
function attentionInputs(m: Made, d: TryDims) {
  const { tokens: N, numQoHeads: Hq, numKvHeads: H, headDim: D, dtype } = d;
  const first = Math.max(0, N - 1);
  const cached = [first + PREFIX, 1 + PREFIX];
  const qLens = [first, Math.min(1, N)];
  const S = cached[0]! + cached[1]!;
  return {
    q: m.random(dtype, 'q', [N, Hq, D]),
    kPool: m.random(dtype, 'kPool', [S, H, D]),
    vPool: m.random(dtype, 'vPool', [S, H, D]),
    qIndptr: m.ints([0, qLens[0]!, qLens[0]! + qLens[1]!]),
    kvIndptr: m.ints([0, cached[0]!, S]),
    kvSlots: m.ints(shuffled(m.seed, 'kvSlots', S)),
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
  };
}

const pagedAttention: OpRun = {
  op: 'pagedAttention',
  method: 'pagedAttention',
  maxPosition: () => 0,
  describe: (d) => {
    const first = Math.max(0, d.tokens - 1);
    return `two requests over one [S, H, D] pool of random ${d.dtype} rows: ${first} new queries over ${first + PREFIX} cached tokens (causal), and one decoding query over ${1 + PREFIX}; q [N, Hq, D] = [${d.tokens}, ${d.numQoHeads}, ${d.headDim}], the cached tokens at shuffled slots.`;
  },
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const args = attentionInputs(m, d);
    return {
      async result() {
        const { out, lse } = b.pagedAttention(args as never) as { out: Tensor; lse: Tensor };
        m.keep(out);
        m.keep(lse);
        return readAll(b, { out, lse });
      },
      enqueue() {
        const { out, lse } = b.pagedAttention(args as never) as { out: Tensor; lse: Tensor };
        out.dispose();
        lse.dispose();
      },
      dispose: () => m.dispose(),
    };
  },
  mistake: {
    label: "a cached token's slot past the pool",
    call(b, d, seed) {
      const m = new Made(b, seed);
      try {
        const args = attentionInputs(m, d);
        const slots = shuffled(seed, 'kvSlots', args.kvSlots.shape[0]!);
        slots[slots.length - 1] = slots.length;
        const { out, lse } = b.pagedAttention({ ...args, kvSlots: m.ints(slots) } as never) as { out: Tensor; lse: Tensor };
        m.keep(out);
        m.keep(lse);
      } finally {
        m.dispose();
      }
    },
  },
};

/** MLA's widths from the head dim: kv_lora_rank 4·D, qk_rope_head_dim D/2, query heads of D + D/2 (DeepSeek-V3's 512, 64 and 192 at D = 128). */
const mlaWidths = (d: TryDims) => ({ C: 4 * d.headDim, R: d.headDim / 2, Dq: d.headDim + d.headDim / 2 });

/** mlaPoolFused's inputs: each token's latent row [c_kv, k_pe] and query heads, its position and slot, and a one-head latent pool. */
function mlaInputs(m: Made, d: TryDims, latentWidth?: number) {
  const { tokens: N, numQoHeads: Hq, dtype } = d;
  const { C, R, Dq } = mlaWidths(d);
  const S = poolSlots(d);
  return {
    kvLatent: m.random(dtype, 'kvLatent', [N, latentWidth ?? C + R]),
    kvNormWeight: m.random('f32', 'kvNormWeight', [C], 0.5, 1.5),
    eps: EPS,
    q: m.random(dtype, 'q', [N, Hq, Dq]),
    positions: m.ints(positionsOf(d)),
    slots: m.ints(shuffled(m.seed, 'slots', S).slice(0, Math.max(0, N))),
    pool: m.random(dtype, 'pool', [S, 1, C + R]),
    kvLoraRank: C,
    qkRopeHeadDim: R,
    ropeBase: ROPE_BASE,
  };
}

const mlaPoolFused: OpRun = {
  op: 'mlaPoolFused',
  method: 'mlaPoolFused',
  maxPosition: (d) => FIRST_POSITION + d.tokens - 1,
  describe: (d) => {
    const { C, R, Dq } = mlaWidths(d);
    return `multi-head latent attention's cache write (DeepSeek-V3's widths at head dim 128): kvLatent [N, C + R] = [${d.tokens}, ${C} + ${R}] and q [N, Hq, ${Dq}] of ${d.dtype} values in [-1, 1), kv_a_layernorm weights in [0.5, 1.5), GPT-J pairs from ropeBase ${ROPE_BASE}, positions ${FIRST_POSITION}–${FIRST_POSITION + d.tokens - 1}, rows written at shuffled slots of a [S, 1, ${C + R}] pool with S = ${poolSlots(d)} (filled with random rows first).`;
  },
  prepare(b, d, seed) {
    const m = new Made(b, seed);
    const args = mlaInputs(m, d);
    return {
      async result() {
        const { qRot } = b.mlaPoolFused(args as never) as { qRot: Tensor };
        m.keep(qRot);
        return readAll(b, { qRot, pool: args.pool });
      },
      enqueue() {
        (b.mlaPoolFused(args as never) as { qRot: Tensor }).qRot.dispose();
      },
      dispose: () => m.dispose(),
    };
  },
  mistake: {
    label: 'a latent row one value short',
    call(b, d, seed) {
      const m = new Made(b, seed);
      try {
        const { C, R } = mlaWidths(d);
        const { qRot } = b.mlaPoolFused(mlaInputs(m, d, C + R - 1) as never) as { qRot: Tensor };
        m.keep(qRot);
      } finally {
        m.dispose();
      }
    },
  },
};

/** Every op the page runs, in the order of the page. */
export const opRuns: readonly OpRun[] = [fusedNormRopeStacked, ropePoolFused, dequantizeKv, materializeInto, pagedAttention, mlaPoolFused];
