import { runAttentionCase, runCopyCase } from '@kvkit/conformance';
import type { AttentionCase, CopyCase } from '@kvkit/conformance';
import type { Backend, FloatDType } from '@kvkit/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';
import { pagedPassSlots, pagedSplit, pagedTuning, planPagedAttention } from '../src/shaders/pagedPlan.js';
import type { DeviceCaps } from '../src/shaders/plan.js';

/**
 * pagedAttention's paths that the shared cases reach only at sizes too large
 * for SwiftShader: with pieces of 16 tokens, decode and verification requests
 * split over many pieces (merged by lse) and long prefill requests spread their
 * row tiles over their pieces; head dims whose rows are read in u32 units or
 * element by element (16-bit rows of odd D stored with atomics). Each against
 * the f64 reference, as the conformance cases are checked.
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: pagedAttention tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const TIMEOUT_MS = 120_000;

const SMALL_PIECES: AttentionCase[] = [
  { name: 'split decode and verification over pieces of 16, GQA 4:1, D=64', Hq: 8, H: 2, D: 64, requests: [[1, 70], [5, 100], [16, 33], [2, 2], [1, 17]] },
  { name: 'a prefill chunk of 40 over 100 tokens: row tiles spread over its pieces', Hq: 4, H: 2, D: 32, requests: [[40, 100], [1, 50]] },
  { name: 'split, sliding window 20, not causal, HND pages of 8', Hq: 4, H: 1, D: 16, layout: 'HND', pageSize: 8, slidingWindow: 20, causal: false, requests: [[3, 90], [1, 64]] },
  { name: 'split, causal window of 10 (most pieces see nothing)', Hq: 2, H: 1, D: 16, slidingWindow: 10, requests: [[4, 120], [1, 40]] },
  { name: 'split, soft-cap, fp8e4m3 per-head scales', Hq: 4, H: 2, D: 32, pool: 'fp8e4m3', perHead: true, logitSoftcap: 8, requests: [[2, 75], [1, 33]] },
  { name: 'odd head dim 9 (element reads, half-word stores)', Hq: 3, H: 1, D: 9, requests: [[1, 40], [3, 21], [20, 30]] },
  { name: 'head dim 6 (u32 units), MQA', Hq: 4, H: 1, D: 6, requests: [[2, 50], [1, 9]] },
  { name: 'fp8e5m2, head dim 5 (byte reads)', Hq: 2, H: 1, D: 5, pool: 'fp8e5m2', requests: [[1, 37], [2, 8]] },
  { name: 'fp8e4m3, head dim 12 (u32 units of four codes), i64 indices', Hq: 2, H: 2, D: 12, pool: 'fp8e4m3', index: 'i64', requests: [[3, 44], [1, 1]] },
  { name: 'MLA split over pieces: the 576-wide latent as K, its first 512 as V', Hq: 8, H: 1, D: 576, vHeadDim: 512, latent: true, scale: 0.1, requests: [[1, 70], [2, 40], [1, 5]] },
  { name: 'split, vHeadDim 5 of 12 (odd output rows, half-word stores in the merge)', Hq: 2, H: 1, D: 12, vHeadDim: 5, requests: [[1, 50], [3, 33]] },
];

const COPIES: CopyCase[] = [
  { name: 'f16 rows of odd D into bf16 (atomic half stores)', H: 2, D: 5, src: { layout: 'NHD', dtype: 'f16', slots: 7 }, dst: { layout: 'HND', dtype: 'bf16', slots: 8, pageSize: 4 }, pairs: [[0, 7], [6, 1], [3, 3]] },
  { name: 'in place through staging: a skipped pair, a repeated destination, fp8 with per-head scales', H: 2, D: 8, src: { layout: 'NHD', dtype: 'fp8e4m3', slots: 6, perHead: true }, dst: { layout: 'NHD', dtype: 'fp8e4m3', slots: 6, perHead: true }, inPlace: true, pairs: [[0, 1], [1, 0], [-1, 2], [3, 0], [5, 4]] },
  { name: 'bf16 into fp8e5m2 of D = 6 (rows share words)', H: 1, D: 6, src: { layout: 'NHD', dtype: 'bf16', slots: 5 }, dst: { layout: 'NHD', dtype: 'fp8e5m2', slots: 6 }, pairs: [[4, 0], [0, 5], [1, 2], [2, 2]] },
];

withDevice('pagedAttention on WebGPU: pieces, merges and row units', () => {
  let backend: Backend;
  const saved = { ...pagedTuning };
  beforeAll(async () => {
    backend = await createWebGpuBackend();
  });
  afterAll(() => {
    Object.assign(pagedTuning, saved);
    backend?.dispose();
  });

  it('splits only what the GPU needs: one long request fills it, many requests do not split', () => {
    const big = 2 ** 40;
    const long = pagedSplit({ N: 1, Hq: 32, H: 8, D: 128, C: 131072, B: 1 }, big);
    expect(long.tokensPerSplit).toBe(512);
    expect(long.pieces * 8).toBeGreaterThanOrEqual(pagedTuning.targetWorkgroups);
    const decode = pagedSplit({ N: 64, Hq: 32, H: 8, D: 128, C: 64 * 4096, B: 64 }, big);
    expect(decode.tokensPerSplit).toBe(1024);
    expect(Math.ceil(4096 / decode.tokensPerSplit)).toBe(4);
    expect(pagedSplit({ N: 512, Hq: 32, H: 8, D: 128, C: 512 * 4096, B: 512 }, big).partialFloats).toBe(0);
    expect(pagedSplit({ N: 8, Hq: 4, H: 1, D: 64, C: 200, B: 2 }, big).partialFloats).toBe(0);
    // Verification (8 queries, 4 query heads a group) runs its 4 passes of 8 rows side by side; decode one.
    expect(pagedPassSlots(8 * 4, 8)).toBe(4);
    expect(pagedPassSlots(4, 4)).toBe(1);
  });

  it('reads K by lanes where a row\'s lanes fit a subgroup, else a row an invocation', () => {
    const caps = (subgroupMinSize: number): DeviceCaps => ({ subgroups: subgroupMinSize > 0, subgroupMinSize, maxWorkgroupStorageBytes: 16384, maxInvocationsPerWorkgroup: 256, maxStorageBuffersPerStage: 8, f16: { decode: 'integer', encode: 'integer' } });
    const request = (qType: FloatDType, headDim: number) => ({ qType, poolType: qType, layout: 'NHD' as const, headDim, qIndptrType: 'i32' as const, kvIndptrType: 'i32' as const, slotType: 'i32' as const });
    // bf16 D = 128: 16 units of 16 bytes, 16 lanes a row; 4 rows a pass at Hq / H = 4.
    const h200 = planPagedAttention(caps(32), request('bf16', 128), 4);
    expect([h200.kRead, h200.lanes, h200.rowsPerPass, h200.units.words, h200.tileMax]).toEqual(['lanes', 16, 4, 4, 'subgroup']);
    expect(planPagedAttention(caps(4), request('bf16', 128), 4).kRead).toBe('row');
    expect(planPagedAttention(caps(4), request('f32', 16), 4).kRead).toBe('lanes');
    expect(planPagedAttention(caps(0), request('f32', 16), 4)).toMatchObject({ kRead: 'row', tileMax: 'atomic' });
  });

  it('runs the online softmax in each group of lanes for passes of up to 4 rows, over the tile for wider ones and row reads', () => {
    const caps: DeviceCaps = { subgroups: true, subgroupMinSize: 32, maxWorkgroupStorageBytes: 16384, maxInvocationsPerWorkgroup: 256, maxStorageBuffersPerStage: 8, f16: { decode: 'integer', encode: 'integer' } };
    const bf16 = { qType: 'bf16' as const, poolType: 'bf16' as const, layout: 'NHD' as const, headDim: 128, qIndptrType: 'i32' as const, kvIndptrType: 'i32' as const, slotType: 'i32' as const };
    expect(planPagedAttention(caps, bf16, 4)).toMatchObject({ rowsPerPass: 4, softmax: 'group' });
    expect(planPagedAttention(caps, bf16, 32)).toMatchObject({ rowsPerPass: 8, softmax: 'tile' });
    expect(planPagedAttention({ ...caps, subgroups: false, subgroupMinSize: 0 }, bf16, 4)).toMatchObject({ kRead: 'row', softmax: 'tile' });
  });

  for (const c of SMALL_PIECES) {
    for (const dtype of ['f32', 'bf16', 'f16'] as FloatDType[]) {
      it(`${c.name} [${dtype}]`, async () => {
        Object.assign(pagedTuning, { minTokensPerSplit: 16, targetWorkgroups: 1 << 20 });
        try {
          await runAttentionCase(backend, c, dtype);
        } finally {
          Object.assign(pagedTuning, saved);
        }
      }, TIMEOUT_MS);
    }
  }

  it('a split call records the check, the attention and the merge; an unsplit one no merge', async () => {
    const b = backend;
    const [Hq, H, D] = [2, 1, 8];
    const call = (kvLen: number) => {
      const q = b.tensor('f32', [1, Hq, D], new Float32Array(Hq * D).fill(0.5));
      const kPool = b.tensor('f32', [kvLen, H, D], new Float32Array(kvLen * H * D).fill(0.25));
      const vPool = b.tensor('f32', [kvLen, H, D], new Float32Array(kvLen * H * D).fill(1));
      const args = { q, kPool, vPool, qIndptr: b.tensor('i32', [2], [0, 1]), kvIndptr: b.tensor('i32', [2], [0, kvLen]), kvSlots: b.tensor('i32', [kvLen], Int32Array.from({ length: kvLen }, (_, i) => i)), numQoHeads: Hq, numKvHeads: H, headDim: D };
      const before = webGpuBackendStats(b).dispatches;
      const { out } = (b as unknown as { pagedAttention(a: unknown): { out: typeof q } }).pagedAttention(args);
      return { dispatches: webGpuBackendStats(b).dispatches - before, out };
    };
    Object.assign(pagedTuning, { minTokensPerSplit: 16, targetWorkgroups: 1 << 20 });
    try {
      const split = call(100);
      const whole = call(10);
      // Value check of kvSlots, the offsets check, the attention, and the merge where split.
      expect(split.dispatches).toBe(4);
      expect(whole.dispatches).toBe(3);
      for (const { out } of [split, whole]) expect(Array.from(await b.read(out))).toEqual(new Array(Hq * D).fill(1));
      await b.sync();
    } finally {
      Object.assign(pagedTuning, saved);
    }
  }, TIMEOUT_MS);

  it('without subgroups (the tile maximum by workgroup atomics alone): the split and odd-D cases', async () => {
    const workgroupOnly = await createWebGpuBackend({ useSubgroups: false });
    Object.assign(pagedTuning, { minTokensPerSplit: 16, targetWorkgroups: 1 << 20 });
    try {
      for (const c of [SMALL_PIECES[0]!, SMALL_PIECES[3]!, SMALL_PIECES[5]!]) await runAttentionCase(workgroupOnly, c, 'bf16');
    } finally {
      Object.assign(pagedTuning, saved);
      workgroupOnly.dispose();
    }
  }, TIMEOUT_MS);

  for (const c of COPIES) it(`copySlots: ${c.name}`, () => runCopyCase(backend, c), TIMEOUT_MS);
});
