/**
 * `backend.prepare(op, args)` builds ahead what the call will need: after it,
 * the call with those arguments creates no pipeline (counted on an
 * instrumented device of the test's own, and in the backend's stats), writes
 * the same results as a backend that never prepared, and prepare itself writes
 * nothing. Invalid arguments reject with the error the call throws.
 */
import { ContractError } from '@kvkit/contracts';
import type { Backend } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, webGpuBackendStats } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { applicationBuffer, applicationCopy, ownDevice, random } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

/** The test's device, its pipeline creations counted (the backend never replaces a method of a device passed in; the test may). */
async function countedDevice() {
  const device = await ownDevice();
  const counts = { sync: 0, async: 0, modules: 0 };
  const sync = device.createComputePipeline.bind(device);
  const later = device.createComputePipelineAsync.bind(device);
  const module = device.createShaderModule.bind(device);
  device.createComputePipeline = (d) => {
    counts.sync++;
    return sync(d);
  };
  device.createComputePipelineAsync = (d) => {
    counts.async++;
    return later(d);
  };
  device.createShaderModule = (d) => {
    counts.modules++;
    return module(d);
  };
  return { device, counts };
}

type Call = { readonly op: 'ropePoolFused' | 'fusedNormRopeStacked' | 'dequantizeKv' | 'pagedAttention' | 'copySlots' | 'mlaPoolFused'; readonly args: Record<string, unknown>; readonly written: readonly string[] };

/** `count` distinct slots below `below`, scattered. */
const scatteredSlots = (count: number, below: number) => Array.from({ length: count }, (_, i) => (i * 37 + 11) % below);

/**
 * pagedAttention calls of one kind (f32, NHD, D = 16, GQA 2:1, two queries a request): `cached` tokens in all,
 * over two requests; past 256 cached tokens the call is split and merged.
 */
function attentionCall(b: Backend, cached: number, seed: number): Call {
  const [Hq, H, D, S] = [4, 2, 16, 512];
  const t = (shape: number[], at: number) => b.tensor('f32', shape, random(shape.reduce((n, d) => n * d, 1), seed + at));
  const first = Math.floor(cached / 2);
  const args = {
    q: t([4, Hq, D], 0), kPool: t([S, H, D], 1), vPool: t([S, H, D], 2),
    qIndptr: b.tensor('i32', [3], [0, 2, 4]), kvIndptr: b.tensor('i32', [3], [0, first, cached]), kvSlots: b.tensor('i32', [cached], scatteredSlots(cached, S)),
    numQoHeads: Hq, numKvHeads: H, headDim: D,
  };
  return { op: 'pagedAttention', args, written: [] };
}

/** copySlots of bf16 NHD rows into bf16 HND pages of 4 (a repeated destination: the ownership pass runs). */
function copyCall(b: Backend, seed: number): Call {
  const [H, D] = [2, 16];
  const t = (shape: number[], at: number) => b.tensor('bf16', shape, random(shape.reduce((n, d) => n * d, 1), seed + at));
  const args = { kSrc: t([8, H, D], 0), vSrc: t([8, H, D], 1), kDst: t([2, H, 4, D], 2), vDst: t([2, H, 4, D], 3), dstLayout: 'HND', fromSlots: b.tensor('i32', [3], [0, 3, 5]), toSlots: b.tensor('i32', [3], [7, 1, 7]) };
  return { op: 'copySlots', args, written: ['kDst', 'vDst'] };
}

/** Calls of each op and variant: plain, Q/K-norm with mRoPE and scaled angles into fp8 HND pools, strided views, the stacked norm, a dequantize, attention (bf16; f32 over fp8 HND pools; a long split one), copies (across layouts; in place through staging). */
function calls(b: Backend): Call[] {
  const [N, Hq, H, D] = [6, 4, 2, 16];
  const t = (dtype: 'f32' | 'bf16', shape: number[], seed: number) => b.tensor(dtype, shape, random(shape.reduce((n, d) => n * d, 1), seed));
  const slots = b.tensor('i32', [N], [3, 0, 3, 5, -1, 1]);
  const positions = b.tensor('i32', [N], [0, 4, 1, 9, 2, 7]);
  const plain = { q: t('bf16', [N, Hq, D], 1), k: t('bf16', [N, H, D], 2), v: t('bf16', [N, H, D], 3), positions, slots, kPool: t('bf16', [8, H, D], 4), vPool: t('bf16', [8, H, D], 5), numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 10000 };
  const qkv = t('f32', [N, (Hq + 2 * H) * D], 6);
  const { q, k, v } = b.splitQkv(qkv, { numQoHeads: Hq, numKvHeads: H, headDim: D });
  const fp8 = {
    q: t('f32', [N, Hq, D], 7), k: t('f32', [N, H, D], 8), v: t('f32', [N, H, D], 9), slots,
    positions: b.tensor('i32', [3, N], [0, 1, 2, 3, 4, 5, 0, 2, 2, 3, 1, 0, 5, 1, 2, 0, 4, 4]), mropeSection: [2, 3, 3],
    kPool: b.empty('fp8e4m3', [3, H, 4, D]), vPool: b.empty('fp8e4m3', [3, H, 4, D]), kScale: b.tensor('f32', [1], [0.05]), vScale: b.tensor('f32', [H], [0.04, 0.06]), layout: 'HND',
    qNormWeight: t('f32', [D], 10), kNormWeight: t('f32', [D], 11), eps: 1e-6,
    ropeScaling: { type: 'yarn', factor: 4, originalMaxPositions: 4 }, numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 1e6,
  };
  const [T, L, P] = [3, 2, 12];
  const stacked = {
    kv: t('f32', [T, L, 2 * H * D], 12), kNormWeight: t('f32', [L, D], 13), eps: b.tensor('f32', [L], [1e-6, 1e-5]),
    cosSinCache: t('f32', [P, D], 14), positions: b.tensor('i32', [T], [0, 11, 5]), numKvHeads: H, headDim: D, rotaryDim: D,
  };
  return [
    { op: 'ropePoolFused', args: plain, written: ['kPool', 'vPool'] },
    { op: 'ropePoolFused', args: { ...plain, q, k, v, kPool: t('f32', [8, H, D], 15), vPool: t('f32', [8, H, D], 16), ropeStyle: 'gptj' }, written: ['kPool', 'vPool'] },
    { op: 'ropePoolFused', args: fp8, written: ['kPool', 'vPool'] },
    { op: 'fusedNormRopeStacked', args: stacked, written: [] },
    { op: 'dequantizeKv', args: { pool: fp8.kPool, scale: fp8.kScale, slots, rows: b.empty('f32', [N, H, D]), layout: 'HND' }, written: ['rows'] },
    {
      op: 'pagedAttention',
      args: { q: plain.q, kPool: plain.kPool, vPool: plain.vPool, qIndptr: b.tensor('i32', [3], [0, 1, N]), kvIndptr: b.tensor('i32', [3], [0, 3, 8]), kvSlots: b.tensor('i64', [8], [7, 2, 0, 1, 3, 4, 5, 6]), numQoHeads: Hq, numKvHeads: H, headDim: D, slidingWindow: 4 },
      written: [],
    },
    {
      op: 'pagedAttention',
      args: { q: fp8.q, kPool: fp8.kPool, vPool: fp8.vPool, kScale: fp8.kScale, vScale: fp8.vScale, layout: 'HND', qIndptr: b.tensor('i32', [2], [0, N]), kvIndptr: b.tensor('i32', [2], [0, 12]), kvSlots: b.tensor('i32', [12], scatteredSlots(12, 12)), numQoHeads: Hq, numKvHeads: H, headDim: D, out: b.empty('f32', [N, Hq, D]) },
      written: ['out'],
    },
    attentionCall(b, 300, 30),
    copyCall(b, 40),
    // MLA's latent rows into a bf16 pool with the queries, and into an fp8 HND pool whose codes go through the pool pass (rows of 10 + 2).
    {
      op: 'mlaPoolFused',
      args: { kvLatent: t('bf16', [N, 48], 17), kvNormWeight: t('bf16', [32], 18), eps: 1e-6, q: t('bf16', [N, Hq, 24], 19), positions, slots, pool: t('bf16', [8, 1, 48], 20), kvLoraRank: 32, qkRopeHeadDim: 16, ropeBase: 10000 },
      written: ['pool'],
    },
    {
      op: 'mlaPoolFused',
      args: { kvLatent: t('f32', [N, 12], 21), kvNormWeight: t('f32', [10], 22), eps: 1e-6, positions, slots, pool: b.empty('fp8e4m3', [2, 1, 4, 12]), scale: b.tensor('f32', [1], [0.05]), layout: 'HND', kvLoraRank: 10, qkRopeHeadDim: 2, ropeBase: 10000, ropeStyle: 'neox' },
      written: ['pool'],
    },
    {
      op: 'copySlots',
      args: { kSrc: fp8.kPool, vSrc: fp8.vPool, kDst: fp8.kPool, vDst: fp8.vPool, kSrcScale: fp8.kScale, vSrcScale: fp8.vScale, kDstScale: fp8.kScale, vDstScale: fp8.vScale, srcLayout: 'HND', dstLayout: 'HND', fromSlots: b.tensor('i32', [3], [0, 1, 2]), toSlots: b.tensor('i32', [3], [4, 5, 6]) },
      written: ['kDst', 'vDst'],
    },
  ];
}

/** Every tensor a call returns or writes in place, read back as bits. */
async function outcome(b: Backend, call: Call, result: unknown): Promise<number[][]> {
  const tensors = [...Object.values((result ?? {}) as Record<string, Parameters<Backend['readBits']>[0]>), ...call.written.map((name) => call.args[name] as Parameters<Backend['readBits']>[0])];
  return Promise.all(tensors.map(async (x) => Array.from((await b.readBits(x)) as ArrayLike<number>)));
}

function run(b: Backend, call: Call): unknown {
  return (b[call.op] as (args: unknown) => unknown)(call.args);
}

describe.skipIf(!found.ok)(`prepare${why}`, () => {
  it('builds every pipeline of each call ahead with createComputePipelineAsync: the call creates none, and gives the results of an unprepared backend', async () => {
    const { device, counts } = await countedDevice();
    const prepared = await createWebGpuBackend({ device });
    const other = await ownDevice(); // the same features as the counted one, so both reduce alike
    const reference = await createWebGpuBackend({ device: other });
    const ours = calls(prepared);
    const theirs = calls(reference);
    for (const [i, call] of ours.entries()) {
      const before = { ...counts, pipelines: webGpuBackendStats(prepared).pipelines };
      const untouched = await outcome(prepared, call, undefined);
      await prepared.prepare(call.op, call.args as never);
      expect(counts.sync).toBe(before.sync);
      expect(counts.async).toBeGreaterThan(before.async);
      expect(webGpuBackendStats(prepared).pipelines).toBe(before.pipelines + counts.async - before.async);
      // Nothing is written: the pools and rows are as they were.
      expect(await outcome(prepared, call, undefined)).toEqual(untouched);

      const after = { ...counts, pipelines: webGpuBackendStats(prepared).pipelines, dispatches: webGpuBackendStats(prepared).dispatches };
      const result = run(prepared, call);
      expect(webGpuBackendStats(prepared).dispatches).toBeGreaterThan(after.dispatches);
      expect({ sync: counts.sync, async: counts.async, modules: counts.modules, pipelines: webGpuBackendStats(prepared).pipelines }).toEqual({ sync: after.sync, async: after.async, modules: after.modules, pipelines: after.pipelines });
      const expected = await outcome(reference, theirs[i]!, run(reference, theirs[i]!));
      expect(await outcome(prepared, call, result)).toEqual(expected);
    }
    await prepared.sync();
    prepared.dispose();
    reference.dispose();
    device.destroy();
    other.destroy();
  });

  it('a second prepare of the same call builds nothing; a prepared backend still reports a device-found value error at sync', async () => {
    const { device, counts } = await countedDevice();
    const b = await createWebGpuBackend({ device });
    const [call] = calls(b);
    await b.prepare(call!.op, call!.args as never);
    const built = counts.async;
    await b.prepare(call!.op, call!.args as never);
    expect(counts.async).toBe(built);
    await expect(b.sync()).resolves.toBeUndefined();
    b.ropePoolFused({ ...call!.args, slots: b.tensor('i32', [6], [0, 1, 2, 3, 4, 99]) } as never);
    await expect(b.sync()).rejects.toMatchObject({ code: 'KV038' });
    expect(counts.sync).toBe(0);
    b.dispose();
    device.destroy();
  });

  it("on the application's buffers: prepare submits nothing and leaves them as they were; the call then submits as it returns", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const [N, H, D, S] = [4, 2, 8, 6];
    const pool = random(S * H * D, 21);
    const kBuffer = applicationBuffer(device, pool);
    const vBuffer = applicationBuffer(device, pool);
    const args = {
      q: b.tensor('f32', [N, H, D], random(N * H * D, 22)), k: b.tensor('f32', [N, H, D], random(N * H * D, 23)), v: b.tensor('f32', [N, H, D], random(N * H * D, 24)),
      positions: b.tensor('i32', [N], [3, 1, 4, 1]), slots: b.tensor('i32', [N], [5, 0, 5, 2]),
      kPool: b.wrap(kBuffer, 'f32', [S, H, D]), vPool: b.wrap(vBuffer, 'f32', [S, H, D]),
      numQoHeads: H, numKvHeads: H, headDim: D, ropeBase: 10000,
    };
    b.flush();
    const submits = webGpuBackendStats(b).submits;
    await b.prepare('ropePoolFused', args);
    expect(webGpuBackendStats(b).submits).toBe(submits);
    for (const buffer of [kBuffer, vBuffer]) expect(Array.from(await applicationCopy(device, buffer, 0, pool.byteLength).words())).toEqual(Array.from(new Uint32Array(pool.buffer)));
    b.ropePoolFused(args);
    expect(webGpuBackendStats(b).submits).toBe(submits + 1);
    const written = new Float32Array((await applicationCopy(device, kBuffer, 0, pool.byteLength).words()).buffer);
    expect(Array.from(written)).not.toEqual(Array.from(pool));
    await b.sync();
    b.dispose();
    device.destroy();
  });

  it('rejects invalid arguments with the ContractError the call throws; an unknown op is KV044, a disposed backend KV003', async () => {
    const b = await createWebGpuBackend();
    const [call] = calls(b);
    const bad = { ...call!.args, kPool: b.empty('bf16', [8, 2, 15]) };
    let thrown: unknown;
    try {
      b.ropePoolFused(bad as never);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ContractError);
    const rejected = await b.prepare('ropePoolFused', bad as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(rejected).toBeInstanceOf(ContractError);
    expect({ code: (rejected as ContractError).code, message: (rejected as Error).message }).toEqual({ code: (thrown as ContractError).code, message: (thrown as Error).message });
    await expect(b.prepare('noSuchOp' as never, {} as never)).rejects.toMatchObject({ code: 'KV044' });
    b.dispose();
    await expect(b.prepare('ropePoolFused', call!.args as never)).rejects.toMatchObject({ code: 'KV003' });
  });

  it('pagedAttention: prepare of a call that is not split builds the merge too, so a later call over more cached tokens builds nothing', async () => {
    const { device, counts } = await countedDevice();
    const b = await createWebGpuBackend({ device });
    const short = attentionCall(b, 40, 50);
    await b.prepare('pagedAttention', short.args as never);
    const built = { ...counts, pipelines: webGpuBackendStats(b).pipelines };
    run(b, short);
    run(b, attentionCall(b, 600, 60));
    expect({ ...counts, pipelines: webGpuBackendStats(b).pipelines }).toEqual(built);
    await b.sync();
    b.dispose();
    device.destroy();
  });

  it('pagedAttention and copySlots: a bad call rejects with its code (a shape at once, an index value on the device at the call\'s sync)', async () => {
    const b = await createWebGpuBackend();
    const attention = attentionCall(b, 20, 70).args;
    const copy = copyCall(b, 80).args;
    await expect(b.prepare('pagedAttention', { ...attention, kvIndptr: b.tensor('i32', [4], [0, 5, 10, 20]) } as never)).rejects.toMatchObject({ code: 'KV077' });
    await expect(b.prepare('pagedAttention', { ...attention, out: b.empty('f32', [4, 2, 16]) } as never)).rejects.toMatchObject({ code: 'KV081' });
    await expect(b.prepare('copySlots', { ...copy, toSlots: b.tensor('i32', [2], [0, 1]) } as never)).rejects.toMatchObject({ code: 'KV083' });
    await expect(b.prepare('copySlots', { ...copy, kDstScale: b.tensor('f32', [1], [1]), vDstScale: b.tensor('f32', [1], [1]) } as never)).rejects.toMatchObject({ code: 'KV071' });
    // Values on the device are not read by prepare: the call reports them at sync, as without prepare.
    const outside = { ...attention, kvSlots: b.tensor('i32', [20], [...scatteredSlots(19, 512), 512]) };
    await expect(b.prepare('pagedAttention', outside as never)).resolves.toBeUndefined();
    b.pagedAttention(outside as never);
    await expect(b.sync()).rejects.toMatchObject({ code: 'KV080' });
    b.dispose();
  });

  // Speed is the bench's to hold, not a test's: this prints the figures (a call after prepare building nothing is asserted above).
  it('pagedAttention and copySlots: prints the first call after prepare against a cold first call and a warm one (enqueue time, SwiftShader)', async () => {
    const time = (f: () => void) => {
      const t0 = performance.now();
      f();
      return performance.now() - t0;
    };
    const kinds = [
      { name: 'pagedAttention (split and merged)', make: (b: Backend) => attentionCall(b, 300, 90) },
      { name: 'copySlots (NHD to HND, repeated destination)', make: (b: Backend) => copyCall(b, 100) },
    ];
    for (const kind of kinds) {
      const cold = await createWebGpuBackend();
      const coldCall = kind.make(cold);
      const coldMs = time(() => run(cold, coldCall));
      await cold.sync();
      const warmMs = Math.min(...[0, 1, 2].map(() => time(() => run(cold, coldCall))));
      await cold.sync();
      cold.dispose();
      // Each try on a fresh backend; the fastest of three, as the warm time is, so a pause of the host is not counted.
      const firsts: number[] = [];
      for (let i = 0; i < 3; i++) {
        const { device, counts } = await countedDevice();
        const b = await createWebGpuBackend({ device });
        const call = kind.make(b);
        await b.prepare(call.op, call.args as never);
        const built = { ...counts };
        firsts.push(time(() => run(b, call)));
        // The timed call compiled nothing: what it costs over a warm call is not a pipeline.
        expect(counts, kind.name).toEqual(built);
        await b.sync();
        b.dispose();
        device.destroy();
      }
      const firstMs = Math.min(...firsts);
      console.log(`${kind.name} enqueue: cold first call ${coldMs.toFixed(1)} ms, warm ${warmMs.toFixed(2)} ms; after prepare the first call ${firstMs.toFixed(2)} ms (tries ${firsts.map((x) => x.toFixed(2)).join(', ')})`);
    }
  });

  it('prints the first call after prepare against a cold first call and a warm one (SwiftShader)', async () => {
    const time = (f: () => void) => {
      const t0 = performance.now();
      f();
      return performance.now() - t0;
    };
    const cold = await createWebGpuBackend();
    const coldCall = calls(cold)[2]!;
    const coldMs = time(() => run(cold, coldCall));
    await cold.sync();
    const warmMs = Math.min(...[0, 1, 2].map(() => time(() => run(cold, coldCall))));
    await cold.sync();
    cold.dispose();

    const b = await createWebGpuBackend();
    const call = calls(b)[2]!;
    const t0 = performance.now();
    await b.prepare(call.op, call.args as never);
    const prepareMs = performance.now() - t0;
    const firstMs = time(() => run(b, call));
    await b.sync();
    b.dispose();
    // Printed, not asserted: on a busy 2-core host the ratio is no test (the pipeline counts above are).
    console.log(`ropePoolFused (Q/K-norm, mRoPE, yarn, fp8 HND) enqueue: cold first call ${coldMs.toFixed(1)} ms, warm ${warmMs.toFixed(2)} ms; prepare ${prepareMs.toFixed(1)} ms, then the first call ${firstMs.toFixed(2)} ms`);
  });
});
