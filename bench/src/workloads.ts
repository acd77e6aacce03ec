import type { Backend, DType, FloatDType, Fp8DType, Tensor } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { decodeHalves, encodeFp8s, encodeHalves } from '@kvkit/contracts/backend';
import { PLAIN_ROPE } from './shapes.js';
import type { CopySlotsShape, MaterializeShape, MlaShape, NormRopeShape, PagedShape, RopeConfig, RopePoolShape } from './shapes.js';

/** Inputs live on the device; `enqueue` queues one op call, each time on the next copy of the inputs. */
export interface Workload {
  readonly enqueue: () => void;
  /** One call on the first copy of the inputs, and its outputs read back (for the check before timing). */
  readonly probe: () => Promise<Float32Array[]>;
  readonly dispose: () => void;
}

/** The tensors a workload makes (`keep` notes each and hands it back), disposed with it. */
function madeTensors(): { made: Tensor[]; keep: <T extends Tensor>(t: T) => T } {
  const made: Tensor[] = [];
  return {
    made,
    keep: (t) => {
      made.push(t);
      return t;
    },
  };
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

/** The fp8 code of each bf16 bit pattern's value, per fp8 dtype: built once from the codec's encoder. */
const fp8OfBf16 = new Map<Fp8DType, Uint8Array>();

/**
 * The fp8 codes of `values`, each rounded to bf16 and looked up: the codec's fp8 encoder goes element by element
 * (about 25× the time of its bf16 one, a minute for the paged rows' pools), and the data stays random values
 * rounded to fp8 either way.
 */
function fp8Codes(dtype: Fp8DType, values: Float32Array): Uint8Array {
  let table = fp8OfBf16.get(dtype);
  if (!table) {
    table = new Uint8Array(1 << 16);
    encodeFp8s(dtype, decodeHalves('bf16', Uint16Array.from({ length: 1 << 16 }, (_, i) => i)), table);
    fp8OfBf16.set(dtype, table);
  }
  const out = new Uint8Array(values.length);
  const chunk = 1 << 22;
  const bits = new Uint16Array(Math.min(chunk, values.length));
  for (let at = 0; at < values.length; at += chunk) {
    const part = values.subarray(at, at + chunk);
    encodeHalves('bf16', part, bits);
    for (let i = 0; i < part.length; i++) out[at + i] = table[bits[i]!]!;
  }
  return out;
}

/** A tensor of random values in [-1, 1), the window of `seed`: tensor() from them, or for fp8 their codes through tensorFromBits. */
export function randomTensor(backend: Backend, dtype: DType, shape: readonly number[], seed: number): Tensor {
  const values = randomSource(shape.reduce((a, d) => a * d, 1), seed);
  return isFp8(dtype) ? backend.tensorFromBits(dtype, shape, fp8Codes(dtype, values)) : backend.tensor(dtype, shape, values);
}

/**
 * Inputs that several rows read unchanged (the same random data under other outputs, pool variants or RoPE
 * configs), each made on first use and kept until `dispose()`: a row then pays for its uploads only where no
 * row before it made the same data.
 */
export class SharedInputs {
  private readonly made = new Map<string, Tensor>();
  constructor(readonly backend: Backend) {}

  /** The tensor `key` names, made by `make` the first time. */
  get<T extends Tensor>(key: string, make: () => T): T {
    const held = this.made.get(key);
    if (held) return held as T;
    const t = make();
    this.made.set(key, t);
    return t;
  }

  /** A tensor of random values in [-1, 1), the window of `seed` (the data a workload without sharing makes). */
  random(dtype: DType, shape: readonly number[], seed: number): Tensor {
    return this.get(`random ${dtype} ${shape.join('x')} ${seed}`, () => randomTensor(this.backend, dtype, shape, seed));
  }

  dispose(): void {
    for (const t of this.made.values()) t.dispose();
    this.made.clear();
  }
}

/** Where a workload's inputs come from: a SharedInputs when given, else tensors of its own (kept with `keep`). */
function inputsFrom(backend: Backend, keep: <T extends Tensor>(t: T) => T, shared: SharedInputs | undefined) {
  return {
    random: (dtype: DType, shape: readonly number[], seed: number): Tensor => (shared ? shared.random(dtype, shape, seed) : keep(randomTensor(backend, dtype, shape, seed))),
    get: <T extends Tensor>(key: string, make: () => T): T => (shared ? shared.get(key, make) : keep(make())),
  };
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

/**
 * `opMadeOutputs`: the README's call form, outputs made by each call (and disposed), where the bench's own form passes
 * kOut and vOut. `shared`: kv and the cos/sin cache from there (the same data for either R and either form).
 */
export function normRopeWorkload(backend: Backend, s: NormRopeShape, copies: number, dtype: FloatDType = 'bf16', options: { readonly opMadeOutputs?: boolean; readonly shared?: SharedInputs } = {}): Workload {
  const { made, keep } = madeTensors();
  const inputs = inputsFrom(backend, keep, options.shared);
  const cache = inputs.get(`cos-sin ${CACHE_ROWS}x${s.R}`, () => backend.tensor('f32', [CACHE_ROWS, s.R], cosSinCache(CACHE_ROWS, s.R)));
  const kNormWeight = keep(backend.tensor(dtype, [s.L, s.D], randomFloats(s.L * s.D, 7)));
  const eps = keep(backend.tensor('f32', [s.L], new Float32Array(s.L).fill(1e-6)));
  const sets = Array.from({ length: copies }, (_, i) => ({
    kv: inputs.random(dtype, [s.T, s.L, 2 * s.H * s.D], 11 + i),
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

/** An mlaPoolFused row's pool, and whether it leaves q out (the latent rows alone, where an engine rotates q_pe elsewhere). */
export interface MlaVariant extends PoolVariant {
  readonly withoutQuery?: boolean;
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

/** `shared`: q, k and v from there, the same data for every R, variant and RoPE config of a token count. */
export function ropePoolWorkload(backend: Backend, s: RopePoolShape, copies: number, dtype: FloatDType = 'bf16', variant: RopePoolVariant = {}, shared?: SharedInputs): Workload {
  const { made, keep } = madeTensors();
  const inputs = inputsFrom(backend, keep, shared);
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
    q: inputs.random(dtype, [s.N, s.Hq, s.D], 21 + i),
    k: inputs.random(dtype, [s.N, s.H, s.D], 41 + i),
    v: inputs.random(dtype, [s.N, s.H, s.D], 61 + i),
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
 * mlaPoolFused with DeepSeek-V3's RoPE (rope_theta 10000, YaRN factor 40 over 4096 positions) at positions spread
 * over its 160k context: the latent rows into a one-head pool of N slots at scattered slots (bf16, or fp8 with a
 * scale), and the query heads rotated into new outputs (disposed each call).
 */
export function mlaPoolWorkload(backend: Backend, s: MlaShape, copies: number, dtype: FloatDType = 'bf16', variant: MlaVariant = {}, shared?: SharedInputs): Workload {
  const { made, keep } = madeTensors();
  const inputs = inputsFrom(backend, keep, shared);
  const W = s.C + s.R;
  const kvNormWeight = keep(backend.tensor(dtype, [s.C], randomFloats(s.C, 29)));
  const scale = variant.poolDtype ? { scale: keep(backend.tensor('f32', [1], [0.02])) } : {};
  const poolShape = variant.layout === 'HND' ? [Math.ceil(s.N / PAGE_SIZE), 1, PAGE_SIZE, W] : [s.N, 1, W];
  const sets = Array.from({ length: copies }, (_, i) => ({
    kvLatent: inputs.random(dtype, [s.N, W], 121 + i),
    ...(variant.withoutQuery ? {} : { q: inputs.random(dtype, [s.N, s.Hq, s.Dq], 141 + i) }),
    positions: keep(backend.tensor('i32', [s.N], randomPositions(s.N, 163840, 161 + i))),
    slots: keep(backend.tensor('i32', [s.N], scatteredSlots(s.N))),
    pool: keep(backend.empty(variant.poolDtype ?? dtype, poolShape)),
  }));
  const rope = { ropeBase: 10000, ropeScaling: { type: 'yarn', factor: 40, originalMaxPositions: 4096, betaFast: 32, betaSlow: 1, mscale: 1, mscaleAllDim: 1 } } as const;
  const call = (set: (typeof sets)[number]) =>
    backend.mlaPoolFused({ ...set, kvNormWeight, eps: 1e-6, ...scale, ...rope, kvLoraRank: s.C, qkRopeHeadDim: s.R, numQoHeads: s.Hq, ...(variant.layout === 'HND' ? { layout: 'HND' as const } : {}) });
  let next = 0;
  return {
    enqueue: () => call(sets[next++ % sets.length] as (typeof sets)[number]).qRot?.dispose(),
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      const { qRot } = call(set);
      const out = [...(qRot ? [(await backend.read(qRot)) as Float32Array] : []), (await backend.read(set.pool)) as Float32Array];
      qRot?.dispose();
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
  const { made, keep } = madeTensors();
  const { kScale: scale, layout } = poolOptions(backend, keep, s.H, variant);
  const poolShape = variant.layout === 'HND' ? [Math.ceil(s.N / PAGE_SIZE), s.H, PAGE_SIZE, s.D] : [s.N, s.H, s.D];
  const sets = Array.from({ length: copies }, (_, i) => ({
    pool: keep(randomTensor(backend, variant.poolDtype ?? dtype, poolShape, 81 + i)),
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

/** The bench's draft model as a materializer: random weights and a cos/sin cache (kept with `keep`, or from `shared`: the same model at every T). */
function draftMaterializer(backend: Backend, s: MaterializeShape, keep: <T extends Tensor>(t: T) => T, shared?: SharedInputs) {
  const out = 2 * s.H * s.D;
  const inputs = inputsFrom(backend, keep, shared);
  const kvWeight = inputs.get(`draft kvWeight ${s.L}x${out}x${s.hidden}`, () => backend.tensor('bf16', [s.L, out, s.hidden], randomFloats(s.L * out * s.hidden, 5).map((x) => x / 32)));
  const kNormWeight = inputs.get(`draft kNormWeight ${s.L}x${s.D}`, () => backend.tensor('bf16', [s.L, s.D], randomFloats(s.L * s.D, 9)));
  const cache = inputs.get(`cos-sin ${CACHE_ROWS}x${s.R}`, () => backend.tensor('f32', [CACHE_ROWS, s.R], cosSinCache(CACHE_ROWS, s.R)));
  return backend.createKvMaterializer({ kvWeight, kNormWeight, eps: 1e-6, numKvHeads: s.H, headDim: s.D, rotaryDim: s.R, cosSinCache: cache });
}

/** `shared`: the model and the hidden states from there, the same for the materializeInto rows of this T. */
export function materializeWorkload(backend: Backend, s: MaterializeShape, copies: number, shared?: SharedInputs): Workload {
  const { made, keep } = madeTensors();
  const m = draftMaterializer(backend, s, keep, shared);
  const inputs = inputsFrom(backend, keep, shared);
  const sets = Array.from({ length: copies }, (_, i) => ({
    ctxHidden: inputs.random('bf16', [s.T, s.hidden], 81 + i),
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
export function materializeIntoWorkload(backend: Backend, s: MaterializeShape, copies: number, variant: PoolVariant = {}, shared?: SharedInputs): Workload {
  const { made, keep } = madeTensors();
  const m = draftMaterializer(backend, s, keep, shared);
  const inputs = inputsFrom(backend, keep, shared);
  const options = poolOptions(backend, keep, s.H, variant);
  const slots = scatteredSlots(s.T);
  const sets = Array.from({ length: copies }, (_, i) => ({
    ctxHidden: inputs.random('bf16', [s.T, s.hidden], 81 + i),
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

/** What a pagedAttention row runs beyond decode over each request's own run of slots: another pool, scattered slots, more queries. */
export interface PagedVariant extends PoolVariant {
  /** Queries a request, its last qLen tokens (1, decode, when omitted): speculative verification checks its draft tokens in one call. */
  readonly qLen?: number;
  /** Every request's slots drawn from a random permutation of the pool's, not a run of its own. */
  readonly scattered?: boolean;
}

/** Slots of the pools the paged rows share: enough for every shape given, a whole number of pages. */
export function pagedPoolSlots(shapes: readonly PagedShape[]): number {
  return Math.ceil(Math.max(...shapes.map((s) => s.B * s.kvLen)) / PAGE_SIZE) * PAGE_SIZE;
}

/** A random permutation of [0, n): Fisher–Yates on the seeded xorshift. */
export function randomPermutation(n: number, seed: number): Int32Array {
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = i;
  let x = (0x2545f491 ^ Math.imul(seed, 0x9e3779b1)) >>> 0 || 1;
  for (let i = n - 1; i > 0; i--) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    const j = (x >>> 0) % (i + 1);
    const t = out[i]!;
    out[i] = out[j]!;
    out[j] = t;
  }
  return out;
}

/**
 * The K and V pools of `slots` slots the paged rows read: random rows (fp8: the codes those values round to),
 * NHD, from `inputs` (one upload for every row of a pool dtype). An HND row reads the same storage as
 * [pages, H, PAGE_SIZE, D], a view (the data is as random either way).
 */
function pagedPools(backend: Backend, inputs: ReturnType<typeof inputsFrom>, keep: <T extends Tensor>(t: T) => T, slots: number, H: number, D: number, dtype: FloatDType, variant: PoolVariant) {
  const poolDtype = variant.poolDtype ?? dtype;
  const pool = (name: string, seed: number): Tensor => {
    const shape: number[] = [slots, H, D];
    const nhd = inputs.get(`paged ${name} pool ${poolDtype} ${shape.join('x')}`, () => randomTensor(backend, poolDtype, shape, seed));
    const hnd: number[] = [slots / PAGE_SIZE, H, PAGE_SIZE, D];
    return variant.layout === 'HND' ? keep(backend.view(nhd, hnd)) : nhd;
  };
  return { kPool: pool('K', 201), vPool: pool('V', 203) };
}

/**
 * pagedAttention over B requests of kvLen cached tokens each, qLen queries each (their last tokens), in pools of
 * `poolSlots` slots (`pagedPoolSlots([s])` when omitted; from `shared` where given, so every row reads the same
 * pools): each request's slots a run of its own, or with `scattered` a window of a random permutation of the pool.
 * The output goes to caller tensors; the lse each call makes is disposed.
 */
export function pagedAttentionWorkload(backend: Backend, s: PagedShape, copies: number, variant: PagedVariant = {}, options: { readonly poolSlots?: number; readonly shared?: SharedInputs } = {}): Workload {
  const { made, keep } = madeTensors();
  const dtype: FloatDType = 'bf16';
  const inputs = inputsFrom(backend, keep, options.shared);
  const qLen = variant.qLen ?? 1;
  const N = s.B * qLen;
  const C = s.B * s.kvLen;
  const slots = options.poolSlots ?? pagedPoolSlots([s]);
  const pools = pagedPools(backend, inputs, keep, slots, s.H, s.D, dtype, variant);
  const { layout, ...scales } = poolOptions(backend, keep, s.H, variant);
  const offsets = (per: number) => keep(backend.tensor('i32', [s.B + 1], Int32Array.from({ length: s.B + 1 }, (_, b) => b * per)));
  const kvSlots = variant.scattered ? randomPermutation(slots, 211).subarray(0, C) : Int32Array.from({ length: C }, (_, i) => i);
  const fixed = { ...pools, ...scales, ...(layout ? { layout } : {}), qIndptr: offsets(qLen), kvIndptr: offsets(s.kvLen), kvSlots: keep(backend.tensor('i32', [C], kvSlots)) };
  const sets = Array.from({ length: copies }, (_, i) => ({
    q: inputs.random(dtype, [N, s.Hq, s.D], 221 + i),
    out: keep(backend.empty(dtype, [N, s.Hq, s.D])),
  }));
  const call = (set: (typeof sets)[number]) => backend.pagedAttention({ ...fixed, ...set, numQoHeads: s.Hq, numKvHeads: s.H, headDim: s.D });
  let next = 0;
  return {
    enqueue: () => call(sets[next++ % sets.length] as (typeof sets)[number]).lse.dispose(),
    probe: async () => {
      const { out, lse } = call(sets[0] as (typeof sets)[number]);
      const read = [(await backend.read(out)) as Float32Array, (await backend.read(lse)) as Float32Array];
      lse.dispose();
      return read;
    },
    dispose: () => {
      for (const t of made.reverse()) t.dispose();
    },
  };
}

/**
 * copySlots of M pairs: K and V rows at random distinct slots of the bf16 NHD pools of `poolSlots` slots (the paged
 * rows' pools, from `shared` where given) into pools of M slots in bf16 or `dstPoolDtype` (with per-head scales),
 * at scattered slots; each input copy its own source slots and destination pools.
 */
export function copySlotsWorkload(backend: Backend, s: CopySlotsShape, copies: number, variant: { readonly dstPoolDtype?: 'fp8e4m3' | 'fp8e5m2' } = {}, options: { readonly poolSlots?: number; readonly shared?: SharedInputs } = {}): Workload {
  const { made, keep } = madeTensors();
  const dtype: FloatDType = 'bf16';
  const inputs = inputsFrom(backend, keep, options.shared);
  const slots = options.poolSlots ?? Math.ceil((2 * s.M) / PAGE_SIZE) * PAGE_SIZE;
  const { kPool: kSrc, vPool: vSrc } = pagedPools(backend, inputs, keep, slots, s.H, s.D, dtype, {});
  const dst = variant.dstPoolDtype ? { poolDtype: variant.dstPoolDtype } : {};
  const { kScale, vScale } = poolOptions(backend, keep, s.H, dst);
  const scales = kScale && vScale ? { kDstScale: kScale, vDstScale: vScale } : {};
  const sets = Array.from({ length: copies }, (_, i) => ({
    fromSlots: keep(backend.tensor('i32', [s.M], randomPermutation(slots, 301 + i).subarray(0, s.M))),
    toSlots: keep(backend.tensor('i32', [s.M], randomPermutation(s.M, 401 + i))),
    kDst: keep(backend.empty(variant.dstPoolDtype ?? dtype, [s.M, s.H, s.D])),
    vDst: keep(backend.empty(variant.dstPoolDtype ?? dtype, [s.M, s.H, s.D])),
  }));
  const call = (set: (typeof sets)[number]) => backend.copySlots({ kSrc, vSrc, ...set, ...scales });
  let next = 0;
  return {
    enqueue: () => call(sets[next++ % sets.length] as (typeof sets)[number]),
    probe: async () => {
      const set = sets[0] as (typeof sets)[number];
      call(set);
      return [(await backend.read(set.kDst)) as Float32Array, (await backend.read(set.vDst)) as Float32Array];
    },
    dispose: () => {
      for (const t of made.reverse()) t.dispose();
    },
  };
}
