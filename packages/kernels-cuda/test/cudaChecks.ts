/**
 * CUDA-specific checks beyond the shared conformance suite, written against
 * describe/it/beforeAll/afterAll only so the device bundle can run them under
 * node:test as well as vitest here.
 */
import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { decodeHalves, encodeHalves } from '@kvkit/contracts/backend';
import { createCudaBackend, cudaBackendInfo } from '../src/index.js';
import { measureCopyAt, measureCopyCeilings, timeOnDevice, timeProjectionGemm } from '../src/profiling.js';
import type { MaterializerSchedule } from '../src/profiling.js';
import { untyped, values, withTuning } from './checkSupport.js';

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

const sameBits = (a: Float32Array, b: Float32Array) => a.length === b.length && a.every((x, i) => Object.is(x, b[i]));
const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const sameBytes = (a: ArrayBufferView, b: ArrayBufferView) => {
  const [x, y] = [bytesOf(a), bytesOf(b)];
  return x.length === y.length && x.every((v, i) => v === y[i]);
};

/** Relative L2 distance of two reads. */
function relativeError(got: Float32Array, want: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    num += (got[i]! - want[i]!) ** 2;
    den += want[i]! ** 2;
  }
  return Math.sqrt(num / Math.max(den, 1e-30));
}
const DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];

export function defineCudaChecks(create: () => Promise<Backend>): void {
  describe('cuda: beyond conformance', () => {
    let b: Backend | undefined;
    const backend = () => b!;
    beforeAll(async () => {
      b = await create();
    }, 60_000);
    afterAll(() => b?.dispose());

    for (const dtype of DTYPES) {
      it(`ropePoolFused: 64 tokens on 4 slots, 20 times over; each pool row is its last token's row [${dtype}]`, async () => {
        const b = backend();
        const [N, Hq, H, D, S] = [64, 4, 2, 64, 6];
        const slots = Int32Array.from({ length: N }, (_, n) => n % 4);
        for (let round = 0; round < 20; round++) {
          const made = [
            b.tensor(dtype, [N, Hq, D], values(N * Hq * D, round)),
            b.tensor(dtype, [N, H, D], values(N * H * D, round + 100)),
            b.tensor(dtype, [N, H, D], values(N * H * D, round + 200)),
            b.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => n * 3)),
            b.tensor('i32', [N], slots),
            b.tensor(dtype, [S, H, D], values(S * H * D, 7)),
            b.tensor(dtype, [S, H, D], values(S * H * D, 8)),
          ] as const;
          const [q, k, v, positions, slotTensor, kPool, vPool] = made;
          const out = untyped(b).ropePoolFused({ q, k, v, positions, slots: slotTensor, kPool, vPool, numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 10000 });
          await b.sync();
          const [kRot, vIn, kAfter, vAfter] = await Promise.all([b.read(out.kRot), b.read(v), b.read(kPool), b.read(vPool)]);
          const row = H * D;
          for (let s = 0; s < 4; s++) {
            const last = N - 4 + s;
            check(sameBits((kAfter as Float32Array).subarray(s * row, (s + 1) * row), (kRot as Float32Array).subarray(last * row, (last + 1) * row)), `round ${round}: kPool row ${s} is not token ${last}'s kRot`);
            check(sameBits((vAfter as Float32Array).subarray(s * row, (s + 1) * row), (vIn as Float32Array).subarray(last * row, (last + 1) * row)), `round ${round}: vPool row ${s} is not token ${last}'s v`);
          }
          for (const t of [...made, out.qRot, out.kRot]) t.dispose();
        }
      }, 60_000);

      it(`materializeInto: duplicate slots hold the last token's rows, exactly as materialize computes them [${dtype}]`, async () => {
        const b = backend();
        const [L, H, D, hidden, T, S] = [2, 2, 32, 48, 12, 5];
        const m = untyped(b).createKvMaterializer({
          kvWeight: b.tensor(dtype, [L, 2 * H * D, hidden], values(L * 2 * H * D * hidden, 1, 0.2)),
          kNormWeight: b.tensor('f32', [L, D], values(L * D, 2).map((x) => 1 + 0.1 * x)),
          eps: 1e-6,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        });
        const ctx = b.tensor(dtype, [T, hidden], values(T * hidden, 3));
        const positions = b.tensor('i64', [T], BigInt64Array.from({ length: T }, (_, t) => BigInt(t * 5)));
        const slots = [0, 1, 2, 0, 1, 2, 0, 1, 2, -1, 4, 4];
        const kPool = b.tensor(dtype, [L, S, H, D], values(L * S * H * D, 4));
        const vPool = b.tensor(dtype, [L, S, H, D], values(L * S * H * D, 5));
        m.materializeInto({ ctxHidden: ctx, positions, kPool, vPool, slots: b.tensor('i32', [T], Int32Array.from(slots)) });
        const layers: Promise<Float32Array>[][] = [];
        m.materialize({ ctxHidden: ctx, positions, writeLayerKv: (_l: number, k: Tensor, v: Tensor) => layers.push([b.read(k) as Promise<Float32Array>, b.read(v) as Promise<Float32Array>]) });
        await b.sync();
        const [kAfter, vAfter] = (await Promise.all([b.read(kPool), b.read(vPool)])) as Float32Array[];
        const row = H * D;
        const owner = new Map<number, number>();
        for (let t = 0; t < T; t++) if (slots[t]! >= 0) owner.set(slots[t]!, t);
        for (let l = 0; l < L; l++) {
          const [k, v] = await Promise.all(layers[l]!);
          for (const [slot, t] of owner) {
            const at = (l * S + slot) * row;
            check(sameBits(kAfter!.subarray(at, at + row), k!.subarray(t * row, (t + 1) * row)), `layer ${l} slot ${slot}: K is not token ${t}'s`);
            check(sameBits(vAfter!.subarray(at, at + row), v!.subarray(t * row, (t + 1) * row)), `layer ${l} slot ${slot}: V is not token ${t}'s`);
          }
        }
        m.dispose();
      }, 60_000);
    }

    for (const dtype of ['f16', 'bf16'] as const) {
      it(`host transfers through the device conversion round and widen exactly as the host codec does [${dtype}]`, async () => {
        const b = backend();
        // Every f32 class the codec tells apart: ties at each rounding bit, subnormals of both formats, overflow, NaN payloads, signed zeros.
        const n = 1 << 17;
        const words = new Uint32Array(n);
        let x = 0x12345678;
        for (let i = 0; i < n; i++) {
          x ^= x << 13;
          x ^= x >>> 17;
          x ^= x << 5;
          const pick = i % 8;
          words[i] = pick === 0 ? x : pick === 1 ? (x & 0x807fffff) | ((100 + (i % 60)) << 23) : pick === 2 ? (x & 0xffff0000) | 0x8000 : pick === 3 ? (x & 0xffffe000) | 0x1000 : pick === 4 ? 0x7f800000 | (x & 0x807fffff) : pick === 5 ? (x & 0x80000000) | (x & 0x7fffff) : pick === 6 ? (x & 0x8fffffff) | 0x47000000 : x & 0x80000000;
        }
        const values = new Float32Array(words.buffer);
        const t = b.tensor(dtype, [n], values);
        const want = new Uint16Array(n);
        encodeHalves(dtype, values, want);
        const got = await b.readBits(t);
        const firstBad = (got as Uint16Array).findIndex((h, i) => h !== want[i]);
        check(firstBad < 0, `element ${firstBad}: f32 bits 0x${words[firstBad]?.toString(16)} stored as 0x${(got as Uint16Array)[firstBad]?.toString(16)}, the codec gives 0x${want[firstBad]?.toString(16)}`);
        t.dispose();
        // Every half pattern, twice over (past the conversion threshold), widened on the device.
        const bits = Uint16Array.from({ length: 1 << 17 }, (_, i) => i & 0xffff);
        const h = b.tensorFromBits(dtype, [bits.length], bits);
        const wide = new Uint32Array((await b.read(h)).buffer);
        const wantWide = new Uint32Array(decodeHalves(dtype, bits).buffer);
        const badWide = wide.findIndex((w, i) => w !== wantWide[i]);
        check(badWide < 0, `half 0x${bits[badWide]?.toString(16)} read as f32 bits 0x${wide[badWide]?.toString(16)}, the codec gives 0x${wantWide[badWide]?.toString(16)}`);
        h.dispose();
      });
    }

    it('a materializer in steady state allocates nothing; a larger T grows its workspaces once', async () => {
      const b = backend();
      const [L, H, D, hidden] = [3, 2, 64, 64];
      const m = untyped(b).createKvMaterializer({
        kvWeight: b.tensor('bf16', [L, 2 * H * D, hidden], values(L * 2 * H * D * hidden, 9, 0.1)),
        kNormWeight: b.tensor('bf16', [L, D], new Float32Array(L * D).fill(1)),
        eps: 1e-6,
        numKvHeads: H,
        headDim: D,
        ropeBase: 10000,
      });
      const inputs = (T: number) => ({ ctxHidden: b.tensor('bf16', [T, hidden], values(T * hidden, T)), positions: b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t)), writeLayerKv: () => {} });
      const small = inputs(8);
      const large = inputs(40);
      const into = { ctxHidden: small.ctxHidden, positions: small.positions, kPool: b.empty('bf16', [L, 9, H, D]), vPool: b.empty('bf16', [L, 9, H, D]), slots: b.tensor('i32', [8], Int32Array.from({ length: 8 }, (_, t) => t)) };
      m.materialize(small);
      m.materializeInto(into);
      const settled = cudaBackendInfo(b).allocations;
      for (let i = 0; i < 5; i++) m.materialize(small);
      for (let i = 0; i < 2; i++) m.materializeInto(into);
      check(cudaBackendInfo(b).allocations === settled, `steady-state calls allocated ${cudaBackendInfo(b).allocations - settled} buffers`);
      m.materialize(large);
      const grown = cudaBackendInfo(b).allocations;
      check(grown > settled, 'a larger T did not grow the workspaces');
      for (let i = 0; i < 3; i++) m.materialize(large);
      m.materialize(small);
      m.materializeInto(into);
      check(cudaBackendInfo(b).allocations === grown, `calls after growing allocated ${cudaBackendInfo(b).allocations - grown} more buffers`);
      await b.sync();
      m.dispose();
    }, 60_000);

    // Three layers: stages of one layer, and of two with a shorter last one. Pools of every kind, slots shared by tokens and one skipped.
    const overlapCase = { L: 3, H: 2, D: 128, hidden: 64, T: 40, S: 48 };
    const POOL_KINDS = [
      { name: 'NHD', fp8: false, hnd: false },
      { name: 'HND', fp8: false, hnd: true },
      { name: 'fp8e4m3 NHD', fp8: true, hnd: false },
      { name: 'fp8e4m3 HND', fp8: true, hnd: true },
    ] as const;
    /** materialize's K and V of every layer, and materializeInto's pool bits for each pool kind, on one schedule. */
    const materializeAll = async (b: Backend, dtype: FloatDType, schedule: MaterializerSchedule, per = 1, normSMs = 0) => {
      const { L, H, D, hidden, T, S } = overlapCase;
      const m = untyped(b).createKvMaterializer({
        kvWeight: b.tensor(dtype, [L, 2 * H * D, hidden], values(L * 2 * H * D * hidden, 31, 0.2)),
        kNormWeight: b.tensor(dtype, [L, D], values(L * D, 32).map((x) => 1 + 0.1 * x)),
        eps: b.tensor('f32', [L], Float32Array.from({ length: L }, (_, l) => 1e-6 * (l + 1))),
        numKvHeads: H,
        headDim: D,
        ropeBase: 10000,
      });
      const ctxHidden = b.tensor(dtype, [T, hidden], values(T * hidden, 33));
      const positions = b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => 3 * t + 1));
      const slots = b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => (t === 7 ? -1 : (t * 7) % 29)));
      const layers: Promise<Float32Array>[] = [];
      const pools: Promise<ArrayBufferView>[] = [];
      await withTuning({ materializerSchedule: schedule, overlapLayersPerStage: per, overlapNormMultiprocessors: normSMs }, async () => {
        m.materialize({ ctxHidden, positions, writeLayerKv: (_l: number, k: Tensor, v: Tensor) => layers.push(b.read(k) as Promise<Float32Array>, b.read(v) as Promise<Float32Array>) });
        for (const kind of POOL_KINDS) {
          if (kind.fp8 && dtype !== 'bf16') continue;
          const poolDtype = kind.fp8 ? 'fp8e4m3' : dtype;
          const shape = kind.hnd ? [L, S / 16, H, 16, D] : [L, S, H, D];
          const n = L * S * H * D;
          const pool = (seed: number) => (kind.fp8 ? b.tensorFromBits('fp8e4m3', shape, Uint8Array.from(values(n, seed), (x) => Math.floor((x + 1) * 60))) : b.tensor(poolDtype as FloatDType, shape, values(n, seed)));
          const [kPool, vPool] = [pool(34), pool(35)];
          const scales = kind.fp8 ? { kScale: b.tensor('f32', [H], [0.05, 0.08]), vScale: b.tensor('f32', [H], [0.07, 0.11]) } : {};
          m.materializeInto({ ctxHidden, positions, slots, kPool, vPool, ...scales, ...(kind.hnd ? { layout: 'HND' } : {}) });
          pools.push(b.readBits(kPool), b.readBits(vPool));
        }
      });
      await b.sync();
      const out = { layers: await Promise.all(layers), pools: await Promise.all(pools) };
      m.dispose();
      return out;
    };

    it('the overlapped materializer schedule gives the batched one\'s bits on the package GEMM: materialize and every pool kind, one and two layers a stage, norms on the whole device or on 4 multiprocessors', async () => {
      const k = await createCudaBackend({ gemm: 'kvkit' });
      try {
        for (const dtype of ['bf16', 'f32'] as const) {
          const batched = await materializeAll(k, dtype, 'batched');
          for (const [per, normSMs] of [[1, 0], [2, 0], [1, 4]] as const) {
            const how = `${dtype}, ${per} a stage, norms on ${normSMs || 'all'} multiprocessors`;
            const overlapped = await materializeAll(k, dtype, 'overlapped', per, normSMs);
            for (const [i, want] of batched.layers.entries()) check(sameBits(overlapped.layers[i]!, want), `${how}: layer ${i >> 1} ${i & 1 ? 'V' : 'K'} differs from the batched schedule's`);
            for (const [i, want] of batched.pools.entries()) check(sameBytes(overlapped.pools[i]!, want), `${how}: ${POOL_KINDS[i >> 1]!.name} ${i & 1 ? 'vPool' : 'kPool'} differs from the batched schedule's`);
          }
        }
      } finally {
        k.dispose();
      }
    }, 120_000);

    it('the overlapped materializer schedule on cuBLASLt is within rounding of the batched one (its algorithm may differ with the batch and the multiprocessors targeted)', async () => {
      const b = backend();
      const batched = await materializeAll(b, 'bf16', 'batched');
      for (const normSMs of [0, 8]) {
        const overlapped = await materializeAll(b, 'bf16', 'overlapped', 1, normSMs);
        for (const [i, want] of batched.layers.entries()) {
          const error = relativeError(overlapped.layers[i]!, want);
          check(error <= 1e-2, `norms on ${normSMs || 'all'} multiprocessors, layer ${i >> 1} ${i & 1 ? 'V' : 'K'}: relative error ${error} against the batched schedule`);
        }
      }
    }, 60_000);

    it('on the overlapped schedule a call the device check rejects writes nothing to any layer of the pools, and the next call writes them all', async () => {
      const b = backend();
      const [L, H, D, hidden, T, S] = [4, 2, 128, 64, 24, 32];
      await withTuning({ materializerSchedule: 'overlapped', overlapLayersPerStage: 1, overlapNormMultiprocessors: 4 }, async () => {
        const m = untyped(b).createKvMaterializer({
          kvWeight: b.tensor('bf16', [L, 2 * H * D, hidden], values(L * 2 * H * D * hidden, 41, 0.2)),
          kNormWeight: b.tensor('bf16', [L, D], new Float32Array(L * D).fill(1)),
          eps: 1e-6,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        });
        const ctxHidden = b.tensor('bf16', [T, hidden], values(T * hidden, 42));
        const slots = b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t));
        const kPool = b.tensor('bf16', [L, S, H, D], values(L * S * H * D, 43));
        const vPool = b.tensor('bf16', [L, S, H, D], values(L * S * H * D, 44));
        const held = [await b.readBits(kPool), await b.readBits(vPool)];
        // One bad slot (past the pool) among good tokens: found by the device check, thrown by the next sync.
        const bad = b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => (t === T - 1 ? S : t)));
        const positions = b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t));
        m.materializeInto({ ctxHidden, positions, slots: bad, kPool, vPool });
        let thrown: unknown;
        try {
          await b.sync();
        } catch (e) {
          thrown = e;
        }
        check(thrown !== undefined, 'sync after a call with a slot past the pool did not throw');
        check(sameBytes(await b.readBits(kPool), held[0]!) && sameBytes(await b.readBits(vPool), held[1]!), 'the rejected call wrote into the pools');
        m.materializeInto({ ctxHidden, positions, slots, kPool, vPool });
        await b.sync();
        const [kAfter, vAfter] = [await b.readBits(kPool), await b.readBits(vPool)];
        const layer = S * H * D * 2;
        for (let l = 0; l < L; l++) {
          const rows = T * H * D * 2;
          const changed = (a: ArrayBufferView, was: ArrayBufferView) => !sameBytes(bytesOf(a).subarray(l * layer, l * layer + rows), bytesOf(was).subarray(l * layer, l * layer + rows));
          check(changed(kAfter, held[0]!) && changed(vAfter, held[1]!), `layer ${l}: the call after the rejected one left the pools' rows as they were`);
        }
        m.dispose();
      });
    }, 60_000);

    it('profiling: copy ceiling, device time of an op, and the projection GEMM report sane figures', async () => {
      const b = backend();
      const copies = await measureCopyCeilings(b, 64 << 20);
      // Under compute-sanitizer (run.sh sets KVKIT_SANITIZER) every kernel runs instrumented, far below any real speed.
      const instrumented = Boolean(process.env.KVKIT_SANITIZER);
      const floorGbs = instrumented ? 1 : 100;
      check(copies.map((c) => c.name).join() === 'cuda-copy-grid-stride,cuda-copy-unrolled,cuMemcpyDtoDAsync', `copy ceilings ${copies.map((c) => c.name)}`);
      for (const copy of copies) check(copy.gbs > floorGbs && copy.timing.samplesUs.length > 0 && copy.timing.method === 'cuda-events', `${copy.name} ${copy.gbs} GB/s`);
      // Each copy again at a benchmark row's size, rotated over four buffer pairs; a name it does not know is KV009.
      for (const copy of copies) {
        const sized = await measureCopyAt(b, { copy: copy.name, bytes: 24 << 20, copies: 4, reps: 5 });
        check(sized.name === copy.name && sized.gbs > floorGbs && sized.timing.samplesUs.length === 5, `${copy.name} at 24 MiB: ${sized.gbs} GB/s, ${sized.timing.samplesUs.length} samples`);
      }
      const unknown = await measureCopyAt(b, { copy: 'torch-copy', bytes: 1 << 20 }).then(
        () => undefined,
        (e: unknown) => e as { code?: string },
      );
      check(unknown?.code === 'KV009', `measureCopyAt with an unknown copy: ${String(unknown)}`);
      const gemm = await timeProjectionGemm(b, { T: 256, K: 512, N: 1024, dtype: 'bf16' });
      check(gemm.tflops > (instrumented ? 1e-5 : 0.1) && gemm.engine === cudaBackendInfo(b).gemm.engine, `GEMM ${gemm.tflops} TFLOP/s on ${gemm.engine}`);
      const x = b.tensor('f32', [64, 4, 64], values(64 * 4 * 64, 3));
      const timing = await timeOnDevice(b, () => {
        const out = untyped(b).ropePoolFused({
          q: x,
          k: x,
          v: x,
          positions: b.tensor('i32', [64], new Int32Array(64)),
          slots: b.tensor('i32', [64], new Int32Array(64).fill(-1)),
          kPool: b.empty('f32', [1, 4, 64]),
          vPool: b.empty('f32', [1, 4, 64]),
          numQoHeads: 4,
          numKvHeads: 4,
          headDim: 64,
          ropeBase: 10000,
        });
        out.qRot.dispose();
        out.kRot.dispose();
      });
      check(timing.medianUs > 0 && timing.medianUs < (instrumented ? 1e6 : 1000), `ropePoolFused took ${timing.medianUs} µs`);
    }, 120_000);
  });
}
