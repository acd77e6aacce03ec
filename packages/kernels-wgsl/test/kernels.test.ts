import { buildCosSinCache, compare, patternValues, RELATIVE_TOLERANCE, randomPositive, randomValues, Rng, ropeBaseTolerance } from '@kvkit/conformance';
import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';
import { onDefaultLimits } from './defaultLimits.js';
import { INTEGER_F16 } from '../src/shaders/common.wgsl.js';
import { gemmSplits, planGemm, planKey, planNormRope, planRopeRows, ropeRowUnits } from '../src/shaders/plan.js';

type Untyped = {
  fusedNormRopeStacked(a: unknown): { kOut: Tensor; vOut: Tensor };
  ropePoolFused(a: unknown): { qRot: Tensor; kRot: Tensor };
  createKvMaterializer(a: unknown): { materialize(a: unknown): void; materializeInto(a: unknown): void; dispose(): void };
};
const ops = (b: Backend) => b as unknown as Untyped;

const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: kernel tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const skipNote = probe.ok ? '' : ' (skipped: no WebGPU adapter)';

let gpu: Backend;
let workgroupOnly: Backend;
let cpu: Backend;
beforeAll(async () => {
  if (!probe.ok) return;
  gpu = await createWebGpuBackend();
  workgroupOnly = await createWebGpuBackend({ useSubgroups: false });
  cpu = createCpuBackend();
});
afterAll(() => {
  gpu?.dispose();
  workgroupOnly?.dispose();
  cpu?.dispose();
});

async function readFloats(b: Backend, t: Tensor): Promise<Float32Array> {
  return (await b.read(t)) as Float32Array;
}

function expectClose(what: string, got: Float32Array, want: Float32Array, tolerance: number | 'bit-exact'): void {
  const c = compare(what, got, want, tolerance);
  expect(c.ok, c.message).toBe(true);
}

/** fusedNormRopeStacked on `b` and on the CPU reference, from the same stored inputs. */
async function fusedAgainstCpu(b: Backend, dtype: FloatDType, s: { T: number; L: number; H: number; D: number; R: number; style: 'neox' | 'gptj' }): Promise<void> {
  const { T, L, H, D, R, style } = s;
  const rng = new Rng(T * 7 + D * 13 + R);
  const P = T + 3;
  const kvValues = randomValues(rng, T * L * 2 * H * D);
  const weightValues = randomPositive(rng, L * D);
  const made: [Backend, Tensor][] = [];
  const run = (be: Backend, d: FloatDType) => {
    const t = <X extends Tensor>(x: X) => {
      made.push([be, x]);
      return x;
    };
    const kv = t(be.tensor(d, [T, L, 2 * H * D], kvValues));
    return {
      kv,
      out: ops(be).fusedNormRopeStacked({
        kv,
        kNormWeight: t(be.tensor('f32', [L, D], weightValues)),
        eps: t(be.tensor('f32', [L], new Float32Array(L).fill(1e-5))),
        cosSinCache: t(be.tensor('f32', [P, R], buildCosSinCache(P, R, 10000))),
        positions: t(be.tensor('i32', [T], Int32Array.from({ length: T }, (_, i) => (i * 5 + 2) % P))),
        numKvHeads: H,
        headDim: D,
        rotaryDim: R,
        ropeStyle: style,
      }),
    };
  };
  try {
    const mine = run(b, dtype);
    // The reference gets the values this backend stored (already rounded to the dtype), in f32.
    const stored = await readFloats(b, mine.kv);
    kvValues.set(stored);
    const ref = run(cpu, 'f32');
    await b.sync();
    const [k, v, refK, refV] = await Promise.all([readFloats(b, mine.out.kOut), readFloats(b, mine.out.vOut), readFloats(cpu, ref.out.kOut), readFloats(cpu, ref.out.vOut)]);
    const roundedRefK = (await readFloats(cpu, cpu.tensor(dtype, [refK.length], refK))) as Float32Array;
    expectClose(`kOut ${dtype} D=${D} R=${R} ${style}`, k, roundedRefK, RELATIVE_TOLERANCE[dtype]);
    expectClose(`vOut ${dtype} D=${D}`, v, refV, 'bit-exact');
  } finally {
    for (const [, x] of made) x.dispose();
  }
}

/** Head dims of real models, non-powers of two, and odd ones (16-bit rows then start mid-word). */
const HEAD_DIMS = [8, 10, 24, 72, 136, 256, 9, 15];
const rotaryFor = (D: number) => [D - (D % 2), Math.max(2, 2 * Math.floor(D / 6))];

withDevice(`head_dim sweep, fusedNormRopeStacked vs the CPU reference${skipNote}`, () => {
  for (const D of HEAD_DIMS) {
    for (const dtype of ['f32', 'f16', 'bf16'] as const) {
      it(`D=${D} [${dtype}]: full and partial rotary, neox and gptj`, async () => {
        for (const R of rotaryFor(D)) for (const style of ['neox', 'gptj'] as const) await fusedAgainstCpu(gpu, dtype, { T: 5, L: 2, H: 3, D, R, style });
      });
    }
  }
  it('the workgroup-memory reduction gives the same answers where subgroups are off', async () => {
    for (const D of [24, 64, 136, 256]) await fusedAgainstCpu(workgroupOnly, 'bf16', { T: 4, L: 1, H: 5, D, R: D, style: 'neox' });
  });
});

/** ropePoolFused on `b` and the CPU reference. */
async function ropePoolAgainstCpu(b: Backend, dtype: FloatDType, s: { N: number; Hq: number; H: number; D: number; R: number; style: 'neox' | 'gptj'; S: number }): Promise<void> {
  const { N, Hq, H, D, R, S, style } = s;
  const rng = new Rng(N + D * 3 + Hq);
  const qv = randomValues(rng, N * Hq * D);
  const kv = randomValues(rng, N * H * D);
  const vv = randomValues(rng, N * H * D);
  const positions = Array.from({ length: N }, (_, i) => (i * 37) % 900);
  const slots = Array.from({ length: N }, (_, i) => (i % 3 === 1 ? -1 : (i * 5) % S));
  const run = async (be: Backend, d: FloatDType) => {
    const q = be.tensor(d, [N, Hq, D], qv);
    const k = be.tensor(d, [N, H, D], kv);
    const v = be.tensor(d, [N, H, D], vv);
    const kPool = be.tensor(d, [S, H, D], patternValues(S * H * D));
    const vPool = be.tensor(d, [S, H, D], patternValues(S * H * D, 3));
    const out = ops(be).ropePoolFused({ q, k, v, positions: be.tensor('i64', [N], BigInt64Array.from(positions, BigInt)), slots: be.tensor('i32', [N], slots), kPool, vPool, headDim: D, numQoHeads: Hq, numKvHeads: H, rotaryDim: R, ropeStyle: style, ropeBase: 10000 });
    await be.sync();
    return Promise.all([out.qRot, out.kRot, kPool, vPool].map((t) => readFloats(be, t)));
  };
  const [q, k, kPool, vPool] = await run(b, dtype);
  const [rq, rk, rkPool, rvPool] = await run(cpu, dtype);
  const tol = ropeBaseTolerance(dtype, 900);
  expectClose('qRot', q!, rq!, tol);
  expectClose('kRot', k!, rk!, tol);
  expectClose('kPool', kPool!, rkPool!, tol);
  expectClose('vPool', vPool!, rvPool!, 'bit-exact');
}

withDevice(`ropePoolFused across head dims and both dispatch layouts${skipNote}`, () => {
  for (const D of [8, 24, 72, 136, 9]) {
    it(`D=${D}: bf16 and f16, neox and gptj`, async () => {
      for (const dtype of ['bf16', 'f16'] as const) {
        for (const style of ['neox', 'gptj'] as const) await ropePoolAgainstCpu(gpu, dtype, { N: 7, Hq: 4, H: 2, D, R: D - (D % 2), style, S: 9 });
      }
    });
  }
  it('on a device with the default 8 storage bindings, the query and key parts run as two dispatches with the same answers', async () => {
    await onDefaultLimits(async (small) => {
      const before = webGpuBackendStats(small).dispatches;
      await ropePoolAgainstCpu(small, 'bf16', { N: 6, Hq: 4, H: 2, D: 16, R: 16, style: 'neox', S: 8 });
      // cos/sin table, the check of the slots, the slot ownership pass (one workgroup at 6 tokens), query part, key part.
      expect(webGpuBackendStats(small).dispatches - before).toBe(5);
    });
  });
});

withDevice(`the slot ownership pass${skipNote}`, () => {
  it('leaves its owner table clear after each call: a lower token owns a slot a higher one owned a call before', async () => {
    const [H, D, S] = [2, 8, 4];
    const rng = new Rng(41);
    const call = (slots: number[]) => {
      const N = slots.length;
      const [kPool, vPool] = [gpu.tensor('f32', [S, H, D], randomValues(rng, S * H * D)), gpu.tensor('f32', [S, H, D], randomValues(rng, S * H * D))];
      const v = gpu.tensor('f32', [N, H, D], randomValues(rng, N * H * D));
      const out = ops(gpu).ropePoolFused({
        q: gpu.tensor('f32', [N, H, D], randomValues(rng, N * H * D)),
        k: gpu.tensor('f32', [N, H, D], randomValues(rng, N * H * D)),
        v,
        positions: gpu.tensor('i32', [N], Int32Array.from(slots, (_, n) => n)),
        slots: gpu.tensor('i32', [N], Int32Array.from(slots)),
        kPool,
        vPool,
        numQoHeads: H,
        numKvHeads: H,
        headDim: D,
        ropeBase: 10000,
      });
      return { kPool, vPool, v, kRot: out.kRot };
    };
    call([0, 0, 0, 0, 0, 0, 3]);
    const second = call([0, 1, 3]);
    const [kPool, vPool, kRot, v] = await Promise.all([second.kPool, second.vPool, second.kRot, second.v].map((t) => readFloats(gpu, t)));
    const row = H * D;
    for (const [slot, n] of [[0, 0], [1, 1], [3, 2]] as const) {
      expectClose(`kPool row ${slot}`, kPool!.subarray(slot * row, (slot + 1) * row), kRot!.subarray(n * row, (n + 1) * row), 'bit-exact');
      expectClose(`vPool row ${slot}`, vPool!.subarray(slot * row, (slot + 1) * row), v!.subarray(n * row, (n + 1) * row), 'bit-exact');
    }
  });
});

withDevice(`KvMaterializer: GEMM tiles and alignments, odd head dims${skipNote}`, () => {
  async function materializeAgainstCpu(dtype: FloatDType, s: { T: number; hidden: number; L: number; H: number; D: number; R: number }): Promise<void> {
    const { T, hidden, L, H, D, R } = s;
    const rng = new Rng(T + hidden + D);
    const w = randomValues(rng, L * 2 * H * D * hidden, 0.02, 0.2);
    const x = randomValues(rng, T * hidden);
    const norm = randomPositive(rng, L * D);
    const layers = async (be: Backend) => {
      const m = ops(be).createKvMaterializer({ kvWeight: be.tensor(dtype, [L, 2 * H * D, hidden], w), kNormWeight: be.tensor('f32', [L, D], norm), eps: 1e-5, numKvHeads: H, headDim: D, rotaryDim: R, ropeBase: 10000 });
      const got: Promise<Float32Array>[] = [];
      m.materialize({ ctxHidden: be.tensor(dtype, [T, hidden], x), positions: be.tensor('i32', [T], Int32Array.from({ length: T }, (_, i) => i * 3)), writeLayerKv: (_: number, k: Tensor, v: Tensor) => {
        got.push(readFloats(be, k), readFloats(be, v));
      } });
      await be.sync();
      m.dispose();
      return Promise.all(got);
    };
    const [mine, ref] = await Promise.all([layers(gpu), layers(cpu)]);
    expect(mine.length).toBe(2 * L);
    mine.forEach((got, i) => {
      expectClose(`${i % 2 ? 'V' : 'K'} of layer ${i >> 1}, T=${T} hidden=${hidden} D=${D} [${dtype}]`, got, ref[i]!, ropeBaseTolerance(dtype, 3 * T));
    });
  }
  for (const T of [1, 17, 40, 130]) {
    it(`T=${T} (GEMM tile of ${T <= 16 ? 16 : T <= 32 ? 32 : T <= 64 ? 64 : 128} rows), hidden 24 (vector loads) and 13 (element loads)`, async () => {
      for (const hidden of [24, 13]) await materializeAgainstCpu('bf16', { T, hidden, L: 2, H: 2, D: 16, R: 16 });
    });
  }
  it('few tokens and a long K split K over several workgroups (f32 partial sums, one rounding)', async () => {
    const caps = { subgroups: false, subgroupMinSize: 0, maxWorkgroupStorageBytes: 32768, maxInvocationsPerWorkgroup: 256, maxStorageBuffersPerStage: 8, f16: INTEGER_F16 };
    expect(gemmSplits(planGemm(caps, 'bf16', { T: 3, K: 2048 }), { M: 3, N: 32, K: 2048 }).splits).toBeGreaterThan(1);
    expect(gemmSplits(planGemm(caps, 'bf16', { T: 4096, K: 4096 }), { M: 4096, N: 10240, K: 4096 }).splits).toBe(1);
    await materializeAgainstCpu('bf16', { T: 3, hidden: 2048, L: 1, H: 1, D: 16, R: 16 });
    await materializeAgainstCpu('f16', { T: 2, hidden: 1030, L: 1, H: 2, D: 8, R: 8 });
    await materializeAgainstCpu('f32', { T: 5, hidden: 1536, L: 2, H: 1, D: 8, R: 4 });
  });
  it('odd head dim 9 in f16 and bf16 (layer views of rows that start mid-word), f32 with hidden 130', async () => {
    await materializeAgainstCpu('f16', { T: 5, hidden: 16, L: 2, H: 3, D: 9, R: 8 });
    await materializeAgainstCpu('bf16', { T: 5, hidden: 16, L: 2, H: 3, D: 9, R: 4 });
    await materializeAgainstCpu('f32', { T: 33, hidden: 130, L: 1, H: 2, D: 8, R: 8 });
  });
});

withDevice(`pipelines, batching and buffers${skipNote}`, () => {
  it('plans the same pipeline for the same shape and a new one for a new head dim', () => {
    const caps = { subgroups: true, subgroupMinSize: 32, maxWorkgroupStorageBytes: 32768, maxInvocationsPerWorkgroup: 256, maxStorageBuffersPerStage: 8, f16: INTEGER_F16 };
    const request = { kvType: 'bf16', weightType: 'f32', cacheType: 'f32', positionType: 'i32', slotType: undefined, D: 128, R: 128, style: 'neox', ropeSource: 'cache', epsInWeights: false } as const;
    const plan = planNormRope(caps, request);
    expect(plan.layout).toEqual({ access: 'vector', vecWords: 4, elements: 8, rowVecs: 16 });
    expect(plan.lanesPerRow).toBe(16);
    expect(plan.reduction).toBe('subgroup');
    expect(planNormRope({ ...caps, subgroupMinSize: 8 }, request).reduction).toBe('workgroup');
    expect(planNormRope(caps, { ...request, D: 9, R: 8 }).layout.access).toBe('element');
    expect(planRopeRows(caps, { dtype: 'f16', D: 64, R: 6, style: 'neox', kind: 'all', slotType: 'i32' }).partner).toBe('element');
    expect(planRopeRows(caps, { dtype: 'f32', D: 64, R: 64, style: 'gptj', kind: 'all', slotType: 'i32' }).partner).toBe('local');
    // NeoX with R/2 a whole number of vectors: one invocation per rotation pair (R/16 of them for bf16), plus one per vector past R.
    const pairs = planRopeRows(caps, { dtype: 'bf16', D: 128, R: 64, style: 'neox', kind: 'all', slotType: 'i32' });
    expect(pairs.pairs).toBe(true);
    expect(ropeRowUnits(pairs)).toBe(4 + 8);
    expect(planRopeRows(caps, { dtype: 'bf16', D: 128, R: 128, style: 'gptj', kind: 'all', slotType: 'i32' }).pairs).toBe(false);
    // The device's f16 conversion shapes the WGSL, so it names a pipeline of its own.
    expect(planKey(planNormRope({ ...caps, f16: { decode: 'builtin', encode: 'integer' } }, request))).not.toBe(planKey(plan));
  });

  it('compiles once per kernel shape: repeated calls add no pipelines and, in steady state, no buffers', async () => {
    const b = gpu;
    const [T, L, H, D] = [6, 2, 2, 32];
    const rng = new Rng(5);
    const made: Tensor[] = [];
    const t = <X extends Tensor>(x: X) => {
      made.push(x);
      return x;
    };
    const m = ops(b).createKvMaterializer({ kvWeight: t(b.tensor('bf16', [L, 2 * H * D, 48], randomValues(rng, L * 2 * H * D * 48))), kNormWeight: t(b.tensor('f32', [L, D], randomPositive(rng, L * D))), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 10000 });
    const ctx = t(b.tensor('bf16', [T, 48], randomValues(rng, T * 48)));
    const positions = t(b.tensor('i32', [T], [0, 1, 2, 3, 4, 5]));
    const rope = { q: t(b.tensor('bf16', [T, 4, D], randomValues(rng, T * 4 * D))), k: t(b.tensor('bf16', [T, H, D], randomValues(rng, T * H * D))), v: t(b.tensor('bf16', [T, H, D], randomValues(rng, T * H * D))) };
    const pools = { kPool: t(b.empty('bf16', [T, H, D])), vPool: t(b.empty('bf16', [T, H, D])) };
    const once = () => {
      m.materialize({ ctxHidden: ctx, positions, writeLayerKv: () => {} });
      const out = ops(b).ropePoolFused({ ...rope, ...pools, positions, slots: positions, headDim: D, numQoHeads: 4, numKvHeads: H, ropeBase: 10000 });
      out.qRot.dispose();
      out.kRot.dispose();
    };
    once();
    await b.sync();
    const first = webGpuBackendStats(b);
    for (let i = 0; i < 5; i++) once();
    await b.sync();
    const after = webGpuBackendStats(b);
    expect(after.pipelines).toBe(first.pipelines);
    expect(after.buffersCreated).toBe(first.buffersCreated);
    m.dispose();
    for (const x of made) x.dispose();
  });

  it('ops enqueue without submitting; T = 0 records nothing; sync submits once', async () => {
    const b = gpu;
    const [T, L, H, D] = [3, 1, 2, 16];
    const made: Tensor[] = [];
    const t = <X extends Tensor>(x: X) => {
      made.push(x);
      return x;
    };
    const args = (T: number) => ({
      kv: t(b.tensor('f16', [T, L, 2 * H * D], randomValues(new Rng(1), T * L * 2 * H * D))),
      kNormWeight: t(b.tensor('f16', [L, D], new Float32Array(L * D).fill(1))),
      eps: t(b.tensor('f32', [L], [1e-6])),
      cosSinCache: t(b.tensor('f32', [4, D], buildCosSinCache(4, D, 10000))),
      positions: t(b.tensor('i32', [T], [0, 1, 2].slice(0, T))),
      numKvHeads: H,
      headDim: D,
      rotaryDim: D,
    });
    const full = args(T);
    const empty = args(0);
    await b.sync();
    const start = webGpuBackendStats(b);
    for (let i = 0; i < 20; i++) {
      const out = ops(b).fusedNormRopeStacked(full);
      made.push(out.kOut, out.vOut);
    }
    const queued = webGpuBackendStats(b);
    // Each call: the check of its positions and its eps tensor (one dispatch), then the norm + RoPE.
    expect(queued.dispatches - start.dispatches).toBe(40);
    expect(queued.submits).toBe(start.submits);
    const none = ops(b).fusedNormRopeStacked(empty);
    made.push(none.kOut, none.vOut);
    expect(webGpuBackendStats(b).dispatches).toBe(queued.dispatches);
    await b.sync();
    expect(webGpuBackendStats(b).submits - start.submits).toBe(1);
    for (const x of made) x.dispose();
  });

  it('reports the first bad call since the last sync, once; a call with a bad value writes nothing, its good tokens included', async () => {
    const b = gpu;
    const [T, L, H, D, P] = [4, 1, 1, 8, 6];
    const made: Tensor[] = [];
    const t = <X extends Tensor>(x: X) => {
      made.push(x);
      return x;
    };
    const base = {
      kv: t(b.tensor('bf16', [T, L, 2 * H * D], randomValues(new Rng(2), T * 2 * D))),
      kNormWeight: t(b.tensor('f32', [L, D], new Float32Array(D).fill(1))),
      eps: t(b.tensor('f32', [L], [1e-6])),
      cosSinCache: t(b.tensor('f32', [P, D], buildCosSinCache(P, D, 10000))),
      numKvHeads: H,
      headDim: D,
      rotaryDim: D,
    };
    const outputs = () => ({ kOut: t(b.tensor('bf16', [L, T, H, D], patternValues(T * D))), vOut: t(b.tensor('bf16', [L, T, H, D], patternValues(T * D, 1))) });
    const good = t(b.tensor('i32', [T], [0, 1, 2, 3]));
    const held = outputs();
    const alone = outputs();
    ops(b).fusedNormRopeStacked({ ...base, ...held, positions: t(b.tensor('i64', [T], [1n, 2n ** 40n, 3n, -1n])) });
    ops(b).fusedNormRopeStacked({ ...base, ...held, positions: good });
    ops(b).fusedNormRopeStacked({ ...base, ...held, positions: t(b.tensor('i32', [T], [0, 0, 9, 0])) });
    ops(b).fusedNormRopeStacked({ ...base, ...alone, positions: good });
    await expect(b.sync()).rejects.toMatchObject({ code: 'KV017', details: { index: 1, actual: 2n ** 40n, expected: P } });
    await expect(b.sync()).resolves.toBeUndefined();
    // Only the good call between the two bad ones wrote: held ends as the good call alone leaves its outputs.
    expect(Array.from(await b.readBits(held.kOut))).toEqual(Array.from(await b.readBits(alone.kOut)));
    expect(Array.from(await b.readBits(held.vOut))).toEqual(Array.from(await b.readBits(alone.vOut)));
    const pattern = await b.readBits(t(b.tensor('bf16', [L, T, H, D], patternValues(T * D))));
    expect(Array.from(await b.readBits(alone.kOut))).not.toEqual(Array.from(pattern));
    for (const x of made) x.dispose();
  });

  it('a read started inside writeLayerKv sees that layer; a nested materialize there does not disturb the views', async () => {
    const b = gpu;
    const [T, L, H, D, hidden] = [3, 2, 1, 8, 16];
    const rng = new Rng(9);
    const m = ops(b).createKvMaterializer({ kvWeight: b.tensor('f32', [L, 2 * H * D, hidden], randomValues(rng, L * 2 * H * D * hidden)), kNormWeight: b.tensor('f32', [L, D], new Float32Array(L * D).fill(1)), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 10000 });
    const ctx = b.tensor('f32', [T, hidden], randomValues(rng, T * hidden));
    const positions = b.tensor('i32', [T], [0, 4, 9]);
    const plain: Promise<Float32Array>[] = [];
    m.materialize({ ctxHidden: ctx, positions, writeLayerKv: (_: number, k: Tensor) => plain.push(readFloats(b, k)) });
    const nested: Promise<Float32Array>[] = [];
    m.materialize({ ctxHidden: ctx, positions, writeLayerKv: (layer: number, k: Tensor) => {
      if (layer === 0) m.materialize({ ctxHidden: ctx, positions, writeLayerKv: () => {} });
      nested.push(readFloats(b, k));
    } });
    await b.sync();
    const [a, c] = await Promise.all([Promise.all(plain), Promise.all(nested)]);
    expect(c.map((x) => Array.from(x))).toEqual(a.map((x) => Array.from(x)));
    expect(Array.from(a[0]!)).not.toEqual(Array.from(a[1]!));
    m.dispose();
  });
});
