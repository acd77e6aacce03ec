/**
 * fp8 and paged pools (ops/kvPools.ts) against the CPU reference: ropePoolFused
 * and materializeInto into NHD and HND pools of fp8e4m3, fp8e5m2 and bf16
 * (fp8 also from f16 and f32), with per-tensor and per-head scales, values
 * past the format's largest, NaN, negative and contested slots; the pools'
 * bytes must be identical (readBits), and so must the rows dequantizeKv reads
 * back. A slot past the pool raises KV038 on every backend. With a Q/K-norm
 * and mRoPE, the same into an fp8e4m3 HND pool.
 */
import { isContractError, isFp8 } from '@kvkit/contracts';
import type { Backend, DType, FloatDType, IndexDType, PoolDType, Tensor } from '@kvkit/contracts';
import { decodeFp8s, encodeFp8, fp8Max } from '@kvkit/contracts/backend';
import { describe, it } from 'vitest';
import { randomPositive, randomValues, Rng, seedOf, slotPermutation } from './data.js';
import { materializerOn } from './invariants.js';
import { Scope, untyped } from './tensors.js';
import { Checks } from './tolerances.js';
import { gather } from './views.js';

export interface PoolCase {
  readonly layout: 'NHD' | 'HND';
  readonly poolType: PoolDType;
  readonly perHead: boolean;
  /** Scales so small that most values pass the format's largest and saturate. */
  readonly saturating: boolean;
  readonly H: number;
  readonly D: number;
  readonly slotType: IndexDType;
  /** The dtype of q, k, v and the materializer's weights, for fp8 pools (bf16 where not given). */
  readonly modelType?: FloatDType;
  /** materializeInto with mRoPE: positions [3, T] (three distinct streams), pairs split by this section. */
  readonly mropeSection?: readonly number[];
  /** The section in Qwen3-VL's interleaved layout. */
  readonly mropeInterleaved?: boolean;
}

const PAGE_SIZE = 4;
const PAGES = 5;
const SLOTS = PAGE_SIZE * PAGES;

export const POOL_CASES: readonly PoolCase[] = [
  ...(['fp8e4m3', 'fp8e5m2', 'bf16'] as const).flatMap((poolType) =>
    (['NHD', 'HND'] as const).flatMap((layout) => [
      { layout, poolType, perHead: false, saturating: false, H: 2, D: 8, slotType: 'i32' as const },
      { layout, poolType, perHead: true, saturating: isFp8(poolType), H: 3, D: 6, slotType: 'i64' as const },
    ]),
  ),
  // Odd head dims: rows that share words between slots (HND) or between tokens.
  { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: false, H: 3, D: 5, slotType: 'i32' },
  { layout: 'NHD', poolType: 'fp8e5m2', perHead: false, saturating: false, H: 1, D: 7, slotType: 'i64' },
  { layout: 'HND', poolType: 'bf16', perHead: false, saturating: false, H: 2, D: 3, slotType: 'i32' },
  // Head dims that are whole words of fp8 codes, rows of one and of two words per vector, from each model dtype.
  { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: true, H: 3, D: 16, slotType: 'i64' },
  { layout: 'NHD', poolType: 'fp8e5m2', perHead: true, saturating: true, H: 2, D: 12, slotType: 'i32', modelType: 'f16' },
  { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: true, H: 2, D: 8, slotType: 'i32', modelType: 'f32' },
];

/** materializeInto with mRoPE into paged and fp8 pools: rows written by the norm + RoPE kernel, and (D = 6, fp8) by the pool pass. */
export const MROPE_POOL_CASES: readonly PoolCase[] = [
  { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: false, H: 2, D: 16, slotType: 'i64', mropeSection: [2, 3, 3] },
  { layout: 'HND', poolType: 'bf16', perHead: false, saturating: false, H: 3, D: 8, slotType: 'i32', mropeSection: [1, 2, 1] },
  { layout: 'NHD', poolType: 'fp8e5m2', perHead: false, saturating: false, H: 2, D: 6, slotType: 'i32', modelType: 'f16', mropeSection: [1, 1, 1] },
  // Qwen3-VL's interleaved layout: height at pairs 1 and 4, width at 2 and 5, temporal the rest (6 and 7 where there are 8).
  { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: false, H: 2, D: 16, slotType: 'i64', mropeSection: [4, 2, 2], mropeInterleaved: true },
  { layout: 'NHD', poolType: 'fp8e5m2', perHead: false, saturating: false, H: 2, D: 14, slotType: 'i32', modelType: 'f16', mropeSection: [3, 2, 2], mropeInterleaved: true },
];

const modelType = (c: PoolCase): FloatDType => c.modelType ?? 'bf16';
const label = (c: PoolCase) =>
  `${c.layout} ${c.poolType}${isFp8(c.poolType) ? `, ${c.perHead ? 'per-head' : 'per-tensor'} scale${c.saturating ? ', saturating' : ''}` : ''}, H=${c.H} D=${c.D}, slots ${c.slotType}${c.modelType ? `, from ${c.modelType}` : ''}${c.mropeSection ? `, mRoPE [${c.mropeSection.join(',')}]${c.mropeInterleaved ? ' interleaved' : ''}` : ''}`;

/** The pool shape of a case, with `[L]` in front for materializeInto. */
function poolShape(c: PoolCase, leading: readonly number[] = []): number[] {
  return c.layout === 'NHD' ? [...leading, SLOTS, c.H, c.D] : [...leading, PAGES, c.H, PAGE_SIZE, c.D];
}

/** What one backend builds for a case: the same values on each, from one seed. */
function poolArgs(s: Scope, c: PoolCase, seed: string, leading: readonly number[] = []) {
  const rng = new Rng(seedOf(seed));
  const shape = poolShape(c, leading);
  const count = shape.reduce((a, b) => a * b, 1);
  const scales = (n: number) =>
    c.saturating ? Float32Array.from({ length: n }, () => (0.5 / fp8Max(c.poolType as 'fp8e4m3')) * (1 + rng.next())) : randomPositive(rng, n, 0.25, 2);
  const fp8 = isFp8(c.poolType);
  const groups = c.perHead ? c.H : 1;
  return {
    layout: c.layout,
    kPool: s.float(c.poolType, shape, randomValues(rng, count)),
    vPool: s.float(c.poolType, shape, randomValues(rng, count)),
    ...(fp8 ? { kScale: s.float('f32', [groups], scales(groups)), vScale: s.float('f32', [groups], scales(groups)) } : {}),
  };
}

/** Slots of N tokens: distinct ones, two negative, and the last token repeating the first token's slot (contested). */
function slotsOf(rng: Rng, N: number): number[] {
  const slots = slotPermutation(rng, N - 1, SLOTS, 2);
  const first = slots.find((x) => x >= 0)!;
  return [...slots, first];
}

async function sameBytes(checks: Checks, what: string, backend: Backend, reference: Backend, actual: Tensor, expected: Tensor): Promise<void> {
  const [a, e] = await Promise.all([backend.readBits(actual), reference.readBits(expected)]);
  const bytes = (x: ArrayBufferView) => new Uint8Array(x.buffer, x.byteOffset, x.byteLength);
  const [ab, eb] = [bytes(a), bytes(e)];
  checks.that(ab.length === eb.length, `${what}: ${ab.length} bytes, expected ${eb.length}`);
  const at = ab.findIndex((x, i) => x !== eb[i]);
  checks.that(at < 0, `${what}: byte ${at} is 0x${ab[at]?.toString(16)}, expected 0x${eb[at]?.toString(16)}`);
}

/** Every slot of the pool (one negative) read back with dequantizeKv on both backends: identical f32 rows. */
async function checkReadBack(checks: Checks, both: readonly [Scope, Scope], c: PoolCase, pools: readonly Record<string, unknown>[], which: 'k' | 'v'): Promise<void> {
  const rows: Tensor[] = [];
  for (const [i, s] of both.entries()) {
    const slots = s.index(c.slotType, [SLOTS + 1], [...Array.from({ length: SLOTS }, (_, x) => SLOTS - 1 - x), -1]);
    const out = s.float('f32', [SLOTS + 1, c.H, c.D], new Float32Array((SLOTS + 1) * c.H * c.D).fill(7));
    const p = pools[i]!;
    s.backend.dequantizeKv({ pool: p[`${which}Pool`] as Tensor, slots, rows: out, layout: c.layout, ...(p[`${which}Scale`] ? { scale: p[`${which}Scale`] as Tensor } : {}) } as never);
    rows.push(out);
  }
  await sameBytes(checks, `dequantizeKv of ${which}Pool`, both[0].backend, both[1].backend, rows[0]!, rows[1]!);
}

export async function checkRopePoolIntoPools(backend: Backend, reference: Backend, c: PoolCase): Promise<void> {
  const checks = new Checks(`ropePoolFused into ${label(c)}`);
  const scopes = [new Scope(backend), new Scope(reference)] as const;
  try {
    const N = 9;
    const Hq = 2 * c.H;
    const made = scopes.map((s) => {
      const rng = new Rng(seedOf(`fp8 rope ${label(c)}`));
      const v = randomValues(rng, N * c.H * c.D);
      v[3] = Number.NaN; // NaN stays NaN in every format
      v[c.H * c.D + 1] = 40000; // past e4m3's largest at any scale here
      const args = {
        q: s.float(modelType(c), [N, Hq, c.D], randomValues(rng, N * Hq * c.D)),
        k: s.float(modelType(c), [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        v: s.float(modelType(c), [N, c.H, c.D], v),
        positions: s.index('i32', [N], Array.from({ length: N }, (_, n) => 3 * n + 1)),
        slots: s.index(c.slotType, [N], slotsOf(rng, N)),
        ...poolArgs(s, c, `fp8 pools ${label(c)}`),
        headDim: c.D,
        rotaryDim: c.D - (c.D % 2),
        numQoHeads: Hq,
        numKvHeads: c.H,
        ropeBase: 10000,
      };
      untyped(s.backend).ropePoolFused(args);
      return args;
    });
    await backend.sync();
    for (const pool of ['kPool', 'vPool'] as const) await sameBytes(checks, pool, backend, reference, made[0][pool], made[1][pool]);
    await checkReadBack(checks, scopes, c, made, 'k');
    await checkReadBack(checks, scopes, c, made, 'v');
  } finally {
    for (const s of scopes) s.dispose();
  }
  checks.done();
}

export async function checkMaterializeIntoPools(backend: Backend, reference: Backend, c: PoolCase): Promise<void> {
  const checks = new Checks(`materializeInto ${label(c)}`);
  const scopes = [new Scope(backend), new Scope(reference)] as const;
  try {
    const [L, T, hidden] = [2, 7, 16];
    const made = scopes.map((s) => {
      const rng = new Rng(seedOf(`fp8 materialize ${label(c)}`));
      const m = s.owned(materializerOn(s, modelType(c), { L, H: c.H, D: c.D, R: c.D - (c.D % 2), hidden }, { ropeBase: 10000 }, 1e-5, `fp8 weights ${label(c)}`));
      const args = {
        ctxHidden: s.float(modelType(c), [T, hidden], randomValues(rng, T * hidden)),
        positions: c.mropeSection ? s.index('i64', [3, T], mropeStreams(T)) : s.index('i64', [T], Array.from({ length: T }, (_, t) => 2 * t)),
        slots: s.index(c.slotType, [T], slotsOf(rng, T)),
        ...poolArgs(s, c, `fp8 layer pools ${label(c)}`, [L]),
        ...(c.mropeSection ? { mropeSection: c.mropeSection } : {}),
        ...(c.mropeInterleaved ? { mropeInterleaved: true } : {}),
      };
      m.materializeInto(args);
      return args;
    });
    await backend.sync();
    for (const pool of ['kPool', 'vPool'] as const) await sameBytes(checks, pool, backend, reference, made[0][pool], made[1][pool]);
  } finally {
    for (const s of scopes) s.dispose();
  }
  checks.done();
}

/** Temporal, height and width positions of T tokens, [3, T] row-major: three streams, each its own sequence. */
function mropeStreams(T: number): number[] {
  return [...Array.from({ length: T }, (_, t) => 2 * t), ...Array.from({ length: T }, (_, t) => (3 * t + 1) % 11), ...Array.from({ length: T }, (_, t) => (5 * t + 4) % 13)];
}

/**
 * ropePoolFused into an fp8e4m3 HND pool with q, k and v as splitQkv views of
 * one padded fused projection, the pools as views at odd byte offsets of one
 * buffer and per-head scales as strided views; then dequantizeKv of the pool
 * views. Bit for bit the same as the same calls on owned contiguous copies
 * (and those as the reference's), and the buffer's bytes around the pools
 * are left as they were.
 */
export async function checkFusedQkvIntoFp8Pool(backend: Backend, reference: Backend): Promise<void> {
  const checks = new Checks('ropePoolFused from splitQkv views into fp8 HND pool views');
  const scopes = [new Scope(backend), new Scope(reference)] as const;
  try {
    const [N, Hq, H, D] = [7, 6, 3, 6];
    // Four spare elements per token and four before the first: row starts on whole 32-bit words, which WebGPU reads in place.
    const row = (Hq + 2 * H) * D + 4;
    const rng = new Rng(seedOf('fp8 pools from fused qkv'));
    const fused = randomValues(rng, N * row + 4);
    const shape = [PAGES, H, PAGE_SIZE, D];
    const n = PAGES * H * PAGE_SIZE * D;
    const [kAt, vAt] = [3, 3 + n + 1]; // odd byte offsets, a byte between the pools
    const around = randomValues(rng, 2 * n + 6);
    const scales = randomPositive(rng, 2 * H, 0.25, 2);
    const slots = slotsOf(rng, N);
    const common = { positions: Array.from({ length: N }, (_, t) => 2 * t + 1), headDim: D, rotaryDim: D, numQoHeads: Hq, numKvHeads: H, ropeBase: 10000, layout: 'HND' };
    const call = (s: Scope, x: Record<string, Tensor>) => untyped(s.backend).ropePoolFused({ ...common, ...x, positions: s.index('i32', [N], common.positions), slots: s.index('i64', [N], slots) }) as { qRot: Tensor; kRot: Tensor };
    const copies = (s: Scope) => {
      const part = (heads: number, first: number) => s.float('bf16', [N, heads, D], gather(fused, [N, heads, D], [row, D, 1], 4 + first * D));
      return {
        q: part(Hq, 0),
        k: part(H, Hq),
        v: part(H, Hq + H),
        kPool: s.float('fp8e4m3', shape, around.subarray(kAt, kAt + n)),
        vPool: s.float('fp8e4m3', shape, around.subarray(vAt, vAt + n)),
        kScale: s.float('f32', [H], gather(scales, [H], [2], 0)),
        vScale: s.float('f32', [H], gather(scales, [H], [2], 1)),
      };
    };
    const [s, r] = scopes;
    const b = s.backend;
    const base = b.view(s.float('bf16', [N * row + 4], fused), [N, (Hq + 2 * H) * D], { strides: [row, 1], offset: 4 });
    const split = b.splitQkv(base, { numQoHeads: Hq, numKvHeads: H, headDim: D });
    const buffer = s.float('fp8e4m3', [2 * n + 6], around);
    const scaleBase = s.float('f32', [2 * H], scales);
    const views = {
      ...split,
      kPool: b.view(buffer, shape, { offset: kAt }),
      vPool: b.view(buffer, shape, { offset: vAt }),
      kScale: b.view(scaleBase, [H], { strides: [2] }),
      vScale: b.view(scaleBase, [H], { strides: [2], offset: 1 }),
    };
    const owned = copies(s);
    const expected = copies(r);
    const outs = [call(s, views), call(s, owned), call(r, expected)];
    await backend.sync();
    for (const [name, a, e] of [['qRot', outs[0]!.qRot, outs[1]!.qRot], ['kRot', outs[0]!.kRot, outs[1]!.kRot], ['kPool', views.kPool, owned.kPool], ['vPool', views.vPool, owned.vPool]] as const) {
      await sameBytes(checks, `${name} from views vs owned copies`, backend, backend, a, e);
    }
    for (const pool of ['kPool', 'vPool'] as const) await sameBytes(checks, `${pool} vs the reference`, backend, reference, owned[pool], expected[pool]);
    // The bytes of the buffer outside the two pools are as they were.
    const bytes = (await backend.readBits(buffer)) as Uint8Array;
    const before = Uint8Array.from(around, (x) => encodeFp8('fp8e4m3', x));
    const outside = [0, 1, 2, kAt + n, 2 * n + 4, 2 * n + 5];
    checks.that(
      outside.every((i) => bytes[i] === before[i]),
      `a byte outside the pool views changed: ${outside.map((i) => `${i}: 0x${bytes[i]?.toString(16)} (was 0x${before[i]?.toString(16)})`).join(', ')}`,
    );
    // dequantizeKv reads the pool views (and a strided scale) as it reads the owned pools.
    const read = (pool: Tensor, scale: Tensor) => {
      const rows = s.float('f32', [SLOTS, H, D], new Float32Array(SLOTS * H * D).fill(7));
      b.dequantizeKv({ pool, scale, slots: s.index('i32', [SLOTS], Array.from({ length: SLOTS }, (_, x) => (5 * x) % SLOTS)), rows, layout: 'HND' } as never);
      return rows;
    };
    await sameBytes(checks, 'dequantizeKv of a pool view', backend, backend, read(views.vPool, views.vScale), read(owned.vPool, owned.vScale));
  } finally {
    for (const x of scopes) x.dispose();
  }
  checks.done();
}

export interface NormedMropeCase {
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: 'neox' | 'gptj';
  readonly mropeSection: readonly [number, number, number];
  readonly mropeInterleaved?: boolean;
}

/** Vector rows (Qwen2-VL's split at a smaller head dim), and odd rows with partial rotary read element by element; each also interleaved (Qwen3-VL). */
export const NORMED_MROPE_CASES: readonly NormedMropeCase[] = [
  { Hq: 6, H: 3, D: 64, R: 64, ropeStyle: 'neox', mropeSection: [8, 12, 12] },
  { Hq: 4, H: 2, D: 10, R: 8, ropeStyle: 'gptj', mropeSection: [1, 2, 1] },
  { Hq: 6, H: 3, D: 64, R: 64, ropeStyle: 'neox', mropeSection: [12, 10, 10], mropeInterleaved: true },
  { Hq: 4, H: 2, D: 10, R: 8, ropeStyle: 'gptj', mropeSection: [2, 1, 1], mropeInterleaved: true },
];

const normedLabel = (c: NormedMropeCase) => `Hq=${c.Hq} H=${c.H} D=${c.D} R=${c.R} ${c.ropeStyle} mrope=[${c.mropeSection.join(',')}]${c.mropeInterleaved ? ' interleaved' : ''}`;

/**
 * ropePoolFused with a Q/K-norm (q's weight bf16, k's f32) and mRoPE (three
 * distinct position streams) into an fp8e4m3 HND pool with per-head scales,
 * contested and negative slots: the pools' bytes as the reference's, and
 * the rows dequantizeKv reads back.
 */
export async function checkNormedMropeIntoFp8Pool(backend: Backend, reference: Backend, c: NormedMropeCase): Promise<void> {
  const checks = new Checks(`ropePoolFused with Q/K-norm and mRoPE into fp8e4m3 HND, ${normedLabel(c)}`);
  const scopes = [new Scope(backend), new Scope(reference)] as const;
  const pool: PoolCase = { layout: 'HND', poolType: 'fp8e4m3', perHead: true, saturating: false, H: c.H, D: c.D, slotType: 'i64' };
  try {
    const N = 9;
    const streams = [(n: number) => 3 * n + 1, (n: number) => 2 * (n % 4), (n: number) => 5 + n];
    const made = scopes.map((s) => {
      const rng = new Rng(seedOf(`fp8 normed mrope ${normedLabel(c)}`));
      const args = {
        q: s.float('bf16', [N, c.Hq, c.D], randomValues(rng, N * c.Hq * c.D)),
        k: s.float('bf16', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        v: s.float('bf16', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        qNormWeight: s.float('bf16', [c.D], randomPositive(rng, c.D, 0.5, 1.5)),
        kNormWeight: s.float('f32', [c.D], randomPositive(rng, c.D, 0.5, 1.5)),
        eps: 1e-6,
        positions: s.index('i64', [3, N], streams.flatMap((at) => Array.from({ length: N }, (_, n) => at(n)))),
        mropeSection: c.mropeSection,
        ...(c.mropeInterleaved ? { mropeInterleaved: true } : {}),
        slots: s.index('i64', [N], slotsOf(rng, N)),
        ...poolArgs(s, pool, `fp8 normed mrope pools ${normedLabel(c)}`),
        headDim: c.D,
        rotaryDim: c.R,
        ropeStyle: c.ropeStyle,
        numQoHeads: c.Hq,
        numKvHeads: c.H,
        ropeBase: 10000,
      };
      untyped(s.backend).ropePoolFused(args);
      return args;
    });
    await backend.sync();
    for (const name of ['kPool', 'vPool'] as const) await sameBytes(checks, name, backend, reference, made[0][name], made[1][name]);
    await checkReadBack(checks, scopes, pool, made, 'k');
  } finally {
    for (const s of scopes) s.dispose();
  }
  checks.done();
}

/**
 * A slot at the pool's end raises KV038, found on the host (CPU) or recorded
 * on the device and thrown by sync, and the call writes nothing: the pools
 * (the good tokens' rows too), and the rows of a dequantizeKv with the same
 * slots, keep their bytes.
 */
export async function checkSlotPastPool(backend: Backend, c: PoolCase): Promise<void> {
  const checks = new Checks(`a slot past ${label(c)}`);
  const s = new Scope(backend);
  const codeOf = (call: () => void) => codeAtCallOrSync(backend, call);
  const bytes = (t: Tensor) => bytesOf(backend, t);
  try {
    const rng = new Rng(seedOf(`fp8 bad slot ${label(c)}`));
    const N = 3;
    const pools = poolArgs(s, { ...c, poolType: isFp8(c.poolType) ? c.poolType : 'f32' }, `fp8 bad pools ${label(c)}`);
    const slots = s.index(c.slotType, [N], [1, SLOTS, -1]);
    const held = await Promise.all([bytes(pools.kPool), bytes(pools.vPool)]);
    const code = await codeOf(() =>
      untyped(backend).ropePoolFused({
        q: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        k: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        v: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
        positions: s.index('i32', [N], [0, 1, 2]),
        slots,
        ...pools,
        headDim: c.D,
        rotaryDim: c.D - (c.D % 2),
        numQoHeads: c.H,
        numKvHeads: c.H,
        ropeBase: 10000,
      }),
    );
    checks.that(code === 'KV038', `expected KV038, got ${code ?? 'no error'}`);
    checks.that(JSON.stringify(await bytes(pools.kPool)) === JSON.stringify(held[0]), 'kPool bytes unchanged by the rejected call (the good token\'s slot too)');
    checks.that(JSON.stringify(await bytes(pools.vPool)) === JSON.stringify(held[1]), 'vPool bytes unchanged by the rejected call (the good token\'s slot too)');
    const rows = s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D));
    const rowsHeld = await bytes(rows);
    const readCode = await codeOf(() => untyped(backend).dequantizeKv({ pool: pools.kPool, slots, rows, layout: c.layout, ...(pools.kScale ? { scale: pools.kScale } : {}) }));
    checks.that(readCode === 'KV038', `dequantizeKv: expected KV038, got ${readCode ?? 'no error'}`);
    checks.that(JSON.stringify(await bytes(rows)) === JSON.stringify(rowsHeld), 'dequantizeKv rows unchanged by the rejected call (the good token\'s too)');
  } finally {
    s.dispose();
  }
  checks.done();
}

/**
 * A materializeInto with one negative position (KV017 with ropeBase) writes
 * nothing into the layer pools: the norm + RoPE pass and, for fp8 rows that
 * share words, the pool pass after it both read the call's verdict.
 */
export async function checkRejectedMaterializeInto(backend: Backend, c: PoolCase): Promise<void> {
  const checks = new Checks(`materializeInto with a bad position, ${label(c)}`);
  const s = new Scope(backend);
  try {
    const [L, T, hidden] = [2, 5, 16];
    const rng = new Rng(seedOf(`fp8 rejected materialize ${label(c)}`));
    const m = s.owned(materializerOn(s, modelType(c), { L, H: c.H, D: c.D, R: c.D - (c.D % 2), hidden }, { ropeBase: 10000 }, 1e-5, `fp8 weights ${label(c)}`));
    const pools = poolArgs(s, c, `fp8 rejected pools ${label(c)}`, [L]);
    const held = await Promise.all([bytesOf(backend, pools.kPool), bytesOf(backend, pools.vPool)]);
    const code = await codeAtCallOrSync(backend, () =>
      m.materializeInto({
        ctxHidden: s.float(modelType(c), [T, hidden], randomValues(rng, T * hidden)),
        positions: s.index('i64', [T], [0, 1, -3, 2, 3]),
        slots: s.index(c.slotType, [T], [1, 4, 6, 9, 2]),
        ...pools,
      }),
    );
    checks.that(code === 'KV017', `expected KV017, got ${code ?? 'no error'}`);
    checks.that(JSON.stringify(await bytesOf(backend, pools.kPool)) === JSON.stringify(held[0]), 'kPool bytes unchanged by the rejected call (the good tokens\' slots too)');
    checks.that(JSON.stringify(await bytesOf(backend, pools.vPool)) === JSON.stringify(held[1]), 'vPool bytes unchanged by the rejected call (the good tokens\' slots too)');
  } finally {
    s.dispose();
  }
  checks.done();
}

/**
 * An fp8 scale that is 0, negative, NaN or infinite is KV019 (found on the
 * host on the CPU, on the device elsewhere), and the call writes nothing:
 * ropePoolFused and materializeInto leave both pools as they were,
 * dequantizeKv its rows.
 */
export async function checkBadScale(backend: Backend, c: PoolCase): Promise<void> {
  const checks = new Checks(`a bad scale for ${label(c)}`);
  const s = new Scope(backend);
  try {
    const rng = new Rng(seedOf(`fp8 bad scale ${label(c)}`));
    const groups = c.perHead ? c.H : 1;
    // Per head: one good scale and one bad; per tensor: the bad one alone.
    const bad = (value: number) => s.float('f32', [groups], Float32Array.from({ length: groups }, (_, h) => (h === groups - 1 ? value : 0.5)));
    const expectUnchanged = async (what: string, tensors: readonly Tensor[], call: () => void) => {
      const held = await Promise.all(tensors.map((t) => bytesOf(backend, t)));
      const code = await codeAtCallOrSync(backend, call);
      checks.that(code === 'KV019', `${what}: expected KV019, got ${code ?? 'no error'}`);
      const after = await Promise.all(tensors.map((t) => bytesOf(backend, t)));
      for (let i = 0; i < tensors.length; i++) checks.that(JSON.stringify(after[i]) === JSON.stringify(held[i]), `${what}: tensor ${i} unchanged by the rejected call`);
    };
    const N = 3;
    for (const value of [0, -0.25, Number.NaN, Number.POSITIVE_INFINITY]) {
      const pools = poolArgs(s, c, `fp8 bad scale pools ${label(c)}`);
      await expectUnchanged(`ropePoolFused, vScale ${value}`, [pools.kPool, pools.vPool], () =>
        untyped(backend).ropePoolFused({
          q: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
          k: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
          v: s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D)),
          positions: s.index('i32', [N], [0, 1, 2]),
          slots: s.index(c.slotType, [N], [1, 5, -1]),
          ...pools,
          vScale: bad(value),
          headDim: c.D,
          rotaryDim: c.D - (c.D % 2),
          numQoHeads: c.H,
          numKvHeads: c.H,
          ropeBase: 10000,
        }),
      );
      const rows = s.float('f32', [N, c.H, c.D], randomValues(rng, N * c.H * c.D));
      await expectUnchanged(`dequantizeKv, scale ${value}`, [rows], () => untyped(backend).dequantizeKv({ pool: pools.kPool, slots: s.index(c.slotType, [N], [1, 5, -1]), rows, layout: c.layout, scale: bad(value) }));
    }
    const [L, T, hidden] = [2, 3, 16];
    const m = s.owned(materializerOn(s, modelType(c), { L, H: c.H, D: c.D, R: c.D - (c.D % 2), hidden }, { ropeBase: 10000 }, 1e-5, `fp8 weights ${label(c)}`));
    const layerPools = poolArgs(s, c, `fp8 bad scale layer pools ${label(c)}`, [L]);
    await expectUnchanged('materializeInto, kScale 0', [layerPools.kPool, layerPools.vPool], () =>
      m.materializeInto({ ctxHidden: s.float(modelType(c), [T, hidden], randomValues(rng, T * hidden)), positions: s.index('i64', [T], [0, 1, 2]), slots: s.index(c.slotType, [T], [2, 7, 3]), ...layerPools, kScale: bad(0) }),
    );
  } finally {
    s.dispose();
  }
  checks.done();
}

/** The code a call raises, at the call (host checks) or at the sync after it (device checks); undefined when neither throws. */
async function codeAtCallOrSync(backend: Backend, call: () => void): Promise<string | undefined> {
  try {
    call();
    await backend.sync();
  } catch (e) {
    return isContractError(e) ? e.code : String(e);
  }
  return undefined;
}

async function bytesOf(backend: Backend, t: Tensor): Promise<number[]> {
  const x = await backend.readBits(t);
  return Array.from(new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
}

/** tensor() encodes values to fp8 as the codec does, read() decodes them, and bytes go in and out unchanged. */
export async function checkFp8Tensors(backend: Backend, dtype: 'fp8e4m3' | 'fp8e5m2'): Promise<void> {
  const checks = new Checks(`fp8 tensors [${dtype}]`);
  const s = new Scope(backend);
  try {
    const rng = new Rng(seedOf(`fp8 tensors ${dtype}`));
    const values = randomValues(rng, 37, 1e-3, 600);
    values[0] = Number.NaN;
    values[1] = -0;
    values[2] = 1e6;
    const t = s.float(dtype, [37], values);
    const bits = (await backend.readBits(t)) as Uint8Array;
    const expected = Uint8Array.from(values, (x) => encodeFp8(dtype, x));
    checks.that(bits instanceof Uint8Array && bits.every((b, i) => b === expected[i]), `readBits of tensor() differs from the codec's encoding`);
    const all = Uint8Array.from({ length: 256 }, (_, i) => i);
    const fromBits = s.track(backend.tensorFromBits(dtype as DType, [256], all as never));
    const back = (await backend.readBits(fromBits)) as Uint8Array;
    checks.that(back.every((b, i) => b === i), 'tensorFromBits then readBits changed a byte');
    const decoded = await backend.read(fromBits);
    const want = decodeFp8s(dtype, all);
    checks.that(decoded.every((x, i) => Object.is(x, want[i]) || (Number.isNaN(x) && Number.isNaN(want[i]!))), 'read() of every code differs from the codec');
  } finally {
    s.dispose();
  }
  checks.done();
}

/** The suite's part for these pools: one `describe` the conformance suite calls with its backends. */
export function describeFp8Pools(both: () => [Backend, Backend], timeout: number): void {
  describe('fp8 and paged pools, bytes identical to the reference', () => {
    for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) it(`fp8 tensors round trip [${dtype}]`, () => checkFp8Tensors(both()[0], dtype), timeout);
    for (const c of POOL_CASES) {
      it(`ropePoolFused into ${label(c)}`, () => checkRopePoolIntoPools(...both(), c), timeout);
      it(`materializeInto ${label(c)}`, () => checkMaterializeIntoPools(...both(), c), timeout);
    }
    for (const c of MROPE_POOL_CASES) it(`materializeInto ${label(c)}`, () => checkMaterializeIntoPools(...both(), c), timeout);
    it('ropePoolFused from splitQkv views into fp8 HND pool views, as from owned copies', () => checkFusedQkvIntoFp8Pool(...both()), timeout);
    for (const c of NORMED_MROPE_CASES) it(`ropePoolFused with Q/K-norm and mRoPE into fp8e4m3 HND, per-head scales, ${normedLabel(c)}`, () => checkNormedMropeIntoFp8Pool(...both(), c), timeout);
    for (const c of POOL_CASES.filter((x) => !x.perHead)) it(`a slot past ${label(c)} raises KV038`, () => checkSlotPastPool(both()[0], c), timeout);
    for (const c of POOL_CASES.filter((x) => !x.perHead)) it(`materializeInto with a bad position into ${label(c)} writes nothing`, () => checkRejectedMaterializeInto(both()[0], c), timeout);
    for (const c of POOL_CASES.filter((x) => isFp8(x.poolType))) it(`a scale that is 0, negative, NaN or infinite for ${label(c)} raises KV019 and writes nothing`, () => checkBadScale(both()[0], c), timeout);
  });
}
