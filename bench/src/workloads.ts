import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { PLAIN_ROPE } from './shapes.js';
import type { MaterializeShape, NormRopeShape, RopeConfig, RopePoolShape } from './shapes.js';

/** Inputs live on the device; `enqueue` queues one op call, each time on the next copy of the inputs. */
export interface Workload {
  readonly enqueue: () => void;
  /** One call on the first copy of the inputs, and its outputs read back (for the check before timing). */
  readonly probe: () => Promise<Float32Array[]>;
  readonly dispose: () => void;
}

/** Copies of the inputs are rotated so that small problems are not served from the 60 MB L2. */
const L2_BYTES = 60e6;

export function copiesFor(bytes: number): number {
  return Math.min(32, Math.max(1, Math.ceil((2 * L2_BYTES) / Math.max(bytes, 1))));
}

/** Random values in [-1, 1) (never zeros: the plan measures on random data), from a seeded xorshift. */
export function randomFloats(n: number, seed: number): Float32Array {
  return randomSource(n, seed).slice();
}

let pool: Float32Array = new Float32Array(0);

/**
 * A window of one shared random pool, grown on demand: generating hundreds of
 * millions of values per tensor would cost more than the measurements. Tensor
 * uploads copy it, so windows may overlap.
 */
function randomSource(n: number, seed: number): Float32Array {
  const slack = 4096;
  if (pool.length < n + slack) pool = generate(Math.max(n + slack, 2 * pool.length), 0x9e3779b9);
  const offset = (seed * 7919) % slack;
  return pool.subarray(offset, offset + n);
}

function generate(n: number, seed: number): Float32Array {
  const out = new Float32Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[i] = (x >>> 0) / 2 ** 31 - 1;
  }
  return out;
}

const caches = new Map<string, Float32Array>();

/** Row p: cos(p·f_j) for j < R/2, then sin(p·f_j), f_j = base^(-2j/R); built once per size (uploads copy it). */
export function cosSinCache(rows: number, R: number, base = 10000): Float32Array {
  const key = `${rows} ${R} ${base}`;
  const made = caches.get(key);
  if (made) return made;
  const half = R / 2;
  const cache = new Float32Array(rows * R);
  for (let p = 0; p < rows; p++) {
    for (let j = 0; j < half; j++) {
      const angle = p * base ** (-(2 * j) / R);
      cache[p * R + j] = Math.cos(angle);
      cache[p * R + half + j] = Math.sin(angle);
    }
  }
  caches.set(key, cache);
  return cache;
}

/** Scattered positions below `rows`, as a batch of requests at different depths would have. */
function positionsFor(T: number, rows: number, seed: number): Int32Array {
  const out = new Int32Array(T);
  for (let t = 0; t < T; t++) out[t] = (t * 7919 + seed * 104729) % rows;
  return out;
}

/** Positions uniform in [0, below), from the seeded xorshift. */
export function randomPositions(n: number, below: number, seed: number): Int32Array {
  const u = randomSource(n, seed);
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.min(below - 1, Math.floor((((u[i] as number) + 1) / 2) * below));
  return out;
}

export const CACHE_ROWS = 65536;

/** ropePoolFused computes its angles (no cache): its positions are spread over a long context, as Llama 3.1's and Qwen2.5's 128k. */
export const LONG_CONTEXT = 131072;

/** `opMadeOutputs`: the README's call form, outputs made by each call (and disposed), where the bench's own form passes kOut and vOut. */
export function normRopeWorkload(backend: Backend, s: NormRopeShape, copies: number, dtype: FloatDType = 'bf16', options: { readonly opMadeOutputs?: boolean } = {}): Workload {
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    made.push(t);
    return t;
  };
  const cache = keep(backend.tensor('f32', [CACHE_ROWS, s.R], cosSinCache(CACHE_ROWS, s.R)));
  const kNormWeight = keep(backend.tensor(dtype, [s.L, s.D], randomFloats(s.L * s.D, 7)));
  const eps = keep(backend.tensor('f32', [s.L], new Float32Array(s.L).fill(1e-6)));
  const sets = Array.from({ length: copies }, (_, i) => ({
    kv: keep(backend.tensor(dtype, [s.T, s.L, 2 * s.H * s.D], randomSource(s.T * s.L * 2 * s.H * s.D, 11 + i))),
    positions: keep(backend.tensor('i32', [s.T], positionsFor(s.T, CACHE_ROWS, i))),
    outputs: options.opMadeOutputs ? {} : { kOut: keep(backend.empty(dtype, [s.L, s.T, s.H, s.D])), vOut: keep(backend.empty(dtype, [s.L, s.T, s.H, s.D])) },
  }));
  const call = (set: (typeof sets)[number]) =>
    backend.fusedNormRopeStacked({ kv: set.kv, kNormWeight, eps, cosSinCache: cache, positions: set.positions, numKvHeads: s.H, headDim: s.D, rotaryDim: s.R, ...set.outputs });
  /** Outputs the call made are the caller's to dispose; caller outputs stay. */
  const release = (out: { kOut: Tensor; vOut: Tensor }) => {
    if (!options.opMadeOutputs) return;
    out.kOut.dispose();
    out.vOut.dispose();
  };
  let next = 0;
  return {
    enqueue: () => release(call(sets[next++ % sets.length] as (typeof sets)[number])),
    probe: async () => {
      const out = call(sets[0] as (typeof sets)[number]);
      const read = [(await backend.read(out.kOut)) as Float32Array, (await backend.read(out.vOut)) as Float32Array];
      release(out);
      return read;
    },
    dispose: () => {
      for (const t of made) t.dispose();
    },
  };
}

/** The pools an op writes, where they are not the model dtype's NHD ones: an fp8 dtype (with per-head scales), the paged HND layout. */
export interface PoolVariant {
  readonly poolDtype?: 'fp8e4m3' | 'fp8e5m2';
  /** 'HND': [numPages, H, PAGE_SIZE, D] pools. */
  readonly layout?: 'NHD' | 'HND';
}

/** What a ropePoolFused row runs beyond plain RoPE: the Q/K-norm before it (Qwen3, Gemma 3), other pools, scaled RoPE or mRoPE. */
export interface RopePoolVariant extends PoolVariant {
  readonly qkNorm?: boolean;
  /** The angles: PLAIN_ROPE when omitted. */
  readonly rope?: RopeConfig;
}

/** Rows per page of the bench's HND pools (FlashInfer's and vLLM's common page size). */
export const PAGE_SIZE = 16;

/** A K and a V pool of `slots` slots per leading index (layers), in the dtype and layout `variant` names (empty: every call writes them). */
function makePools(backend: Backend, keep: <T extends Tensor>(t: T) => T, dtype: FloatDType, leading: readonly number[], slots: number, H: number, D: number, variant: PoolVariant) {
  // `slots` slots either way: HND pools hold ceil(slots / PAGE_SIZE) pages.
  const shape = variant.layout === 'HND' ? [...leading, Math.ceil(slots / PAGE_SIZE), H, PAGE_SIZE, D] : [...leading, slots, H, D];
  return {
    kPool: keep(backend.empty(variant.poolDtype ?? dtype, shape)),
    vPool: keep(backend.empty(variant.poolDtype ?? dtype, shape)),
  };
}

/** Per-head scales of fp8 pools (between 0.05 and 0.175), none for the model dtype; the HND layout named where it is used. */
function poolOptions(backend: Backend, keep: <T extends Tensor>(t: T) => T, H: number, variant: PoolVariant) {
  const scale = (seed: number) => keep(backend.tensor('f32', [H], randomFloats(H, seed).map((x) => 0.05 + Math.abs(x) / 8)));
  return { ...(variant.poolDtype ? { kScale: scale(19), vScale: scale(23) } : {}), ...(variant.layout === 'HND' ? { layout: 'HND' as const } : {}) };
}

/** A permutation of [0, n) that scatters neighbours: 7919 is prime, and no token count here is a multiple of it. */
function scatteredSlots(n: number): Int32Array {
  const slots = new Int32Array(n);
  for (let i = 0; i < n; i++) slots[i] = (i * 7919) % n;
  return slots;
}

export function ropePoolWorkload(backend: Backend, s: RopePoolShape, copies: number, dtype: FloatDType = 'bf16', variant: RopePoolVariant = {}): Workload {
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    made.push(t);
    return t;
  };
  const rope = variant.rope ?? PLAIN_ROPE;
  const options = poolOptions(backend, keep, s.H, variant);
  const norm = variant.qkNorm
    ? { qNormWeight: keep(backend.tensor(dtype, [s.D], randomFloats(s.D, 13))), kNormWeight: keep(backend.tensor(dtype, [s.D], randomFloats(s.D, 17))), eps: 1e-6 }
    : {};
  const slots = scatteredSlots(s.N);
  // mRoPE's temporal, height and width streams, each its own random positions.
  const streams = rope.mropeSection ? 3 : 1;
  const positionsShape: number[] = streams === 3 ? [3, s.N] : [s.N];
  const sets = Array.from({ length: copies }, (_, i) => ({
    q: keep(backend.tensor(dtype, [s.N, s.Hq, s.D], randomSource(s.N * s.Hq * s.D, 21 + i))),
    k: keep(backend.tensor(dtype, [s.N, s.H, s.D], randomSource(s.N * s.H * s.D, 41 + i))),
    v: keep(backend.tensor(dtype, [s.N, s.H, s.D], randomSource(s.N * s.H * s.D, 61 + i))),
    positions: keep(backend.tensor('i32', positionsShape, randomPositions(streams * s.N, LONG_CONTEXT, 101 + i))),
    slots: keep(backend.tensor('i32', [s.N], slots)),
    ...makePools(backend, keep, dtype, [], s.N, s.H, s.D, variant),
  }));
  const call = (set: (typeof sets)[number]) => backend.ropePoolFused({ ...set, ...norm, ...options, ...rope, headDim: s.D, numQoHeads: s.Hq, numKvHeads: s.H, rotaryDim: s.R });
  let next = 0;
  return {
    enqueue: () => {
      // The rotated copies are new outputs of each call; dropping them keeps memory flat over many calls.
      const { qRot, kRot } = call(sets[next++ % sets.length] as (typeof sets)[number]);
      qRot.dispose();
      kRot.dispose();
    },
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      const { qRot, kRot } = call(set);
      const read = (t: Tensor) => backend.read(t) as Promise<Float32Array>;
      const out = await Promise.all([read(qRot), read(kRot), read(set.kPool), read(set.vPool)]);
      qRot.dispose();
      kRot.dispose();
      return out;
    },
    dispose: () => {
      for (const t of made) t.dispose();
    },
  };
}

/**
 * dequantizeKv over a pool of N slots filled with random rows (fp8 codes rounded from them), read back at scattered
 * slots into caller rows of `dtype`: the read side of a pool that ropePoolFused writes.
 */
export function dequantizeKvWorkload(backend: Backend, s: RopePoolShape, copies: number, dtype: FloatDType = 'bf16', variant: PoolVariant = {}): Workload {
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    made.push(t);
    return t;
  };
  const { kScale: scale, layout } = poolOptions(backend, keep, s.H, variant);
  const poolShape = variant.layout === 'HND' ? [Math.ceil(s.N / PAGE_SIZE), s.H, PAGE_SIZE, s.D] : [s.N, s.H, s.D];
  const poolElements = poolShape.reduce((n, d) => n * d, 1);
  const sets = Array.from({ length: copies }, (_, i) => ({
    pool: keep(backend.tensor(variant.poolDtype ?? dtype, poolShape, randomSource(poolElements, 81 + i))),
    slots: keep(backend.tensor('i32', [s.N], scatteredSlots(s.N))),
    rows: keep(backend.empty(dtype, [s.N, s.H, s.D])),
  }));
  const call = (set: (typeof sets)[number]) => backend.dequantizeKv({ ...set, ...(scale ? { scale } : {}), ...(layout ? { layout } : {}) });
  let next = 0;
  return {
    enqueue: () => call(sets[next++ % sets.length] as (typeof sets)[number]),
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      call(set);
      return [(await backend.read(set.rows)) as Float32Array];
    },
    dispose: () => {
      for (const t of made) t.dispose();
    },
  };
}

/** The bench's draft model as a materializer: random weights (kept with `keep`) and a cos/sin cache. */
function draftMaterializer(backend: Backend, s: MaterializeShape, keep: <T extends Tensor>(t: T) => T) {
  const out = 2 * s.H * s.D;
  const kvWeight = keep(backend.tensor('bf16', [s.L, out, s.hidden], randomFloats(s.L * out * s.hidden, 5).map((x) => x / 32)));
  const kNormWeight = keep(backend.tensor('bf16', [s.L, s.D], randomFloats(s.L * s.D, 9)));
  const cache = keep(backend.tensor('f32', [CACHE_ROWS, s.R], cosSinCache(CACHE_ROWS, s.R)));
  return backend.createKvMaterializer({ kvWeight, kNormWeight, eps: 1e-6, numKvHeads: s.H, headDim: s.D, rotaryDim: s.R, cosSinCache: cache });
}

export function materializeWorkload(backend: Backend, s: MaterializeShape, copies: number): Workload {
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    made.push(t);
    return t;
  };
  const m = draftMaterializer(backend, s, keep);
  const sets = Array.from({ length: copies }, (_, i) => ({
    ctxHidden: keep(backend.tensor('bf16', [s.T, s.hidden], randomSource(s.T * s.hidden, 81 + i))),
    positions: keep(backend.tensor('i32', [s.T], positionsFor(s.T, CACHE_ROWS, i))),
  }));
  let next = 0;
  const noWrite = () => {};
  return {
    enqueue: () => {
      const set = sets[next++ % sets.length] as (typeof sets)[number];
      m.materialize({ ctxHidden: set.ctxHidden, positions: set.positions, writeLayerKv: noWrite });
    },
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      const reads: Promise<Float32Array>[] = [];
      // A read started inside the callback observes the views' contents (API.md).
      m.materialize({ ctxHidden: set.ctxHidden, positions: set.positions, writeLayerKv: (_layer: number, k: Tensor, v: Tensor) => {
        reads.push(backend.read(k) as Promise<Float32Array>, backend.read(v) as Promise<Float32Array>);
      } });
      return Promise.all(reads);
    },
    dispose: () => {
      m.dispose();
      for (const t of made) t.dispose();
    },
  };
}

/** materializeInto on the materialize workload's model and data: every layer's K and V into [L, ...] pools at scattered slots. */
export function materializeIntoWorkload(backend: Backend, s: MaterializeShape, copies: number, variant: PoolVariant = {}): Workload {
  const made: Tensor[] = [];
  const keep = <T extends Tensor>(t: T): T => {
    made.push(t);
    return t;
  };
  const m = draftMaterializer(backend, s, keep);
  const options = poolOptions(backend, keep, s.H, variant);
  const slots = scatteredSlots(s.T);
  const sets = Array.from({ length: copies }, (_, i) => ({
    ctxHidden: keep(backend.tensor('bf16', [s.T, s.hidden], randomSource(s.T * s.hidden, 81 + i))),
    positions: keep(backend.tensor('i32', [s.T], positionsFor(s.T, CACHE_ROWS, i))),
    slots: keep(backend.tensor('i32', [s.T], slots)),
    ...makePools(backend, keep, 'bf16', [s.L], s.T, s.H, s.D, variant),
  }));
  let next = 0;
  return {
    enqueue: () => m.materializeInto({ ...(sets[next++ % sets.length] as (typeof sets)[number]), ...options }),
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      m.materializeInto({ ...set, ...options });
      return [(await backend.read(set.kPool)) as Float32Array, (await backend.read(set.vPool)) as Float32Array];
    },
    dispose: () => {
      m.dispose();
      for (const t of made) t.dispose();
    },
  };
}
