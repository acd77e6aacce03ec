/**
 * Tensors over the application's own buffers (`backend.wrap`): at element
 * offsets no binding could start at (2 bytes for bf16, 4 for f32), strided,
 * and as q, k, v of one fused projection, ops give bit-identical results to
 * owned tensors of the same bits; usage flags and bad layouts are refused
 * with their codes. The fast path of ropePoolFused reads row-strided q, k, v
 * without the strided copy. Every call that reads or writes one of them, as
 * an input, an output, a pool, a view or a materializer's weights, submits
 * its work before it returns; the same call on owned tensors batches.
 */
import { isContractError } from '@kvkit/contracts';
import type { FloatDType, Tensor } from '@kvkit/contracts';
import { encodeHalves } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '../src/index.js';
import type { WebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { applicationBuffer, ownDevice, random } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

function bitsOf(dtype: FloatDType, values: Float32Array): Uint16Array | Uint32Array {
  if (dtype === 'f32') return new Uint32Array(values.buffer.slice(0));
  const out = new Uint16Array(values.length);
  encodeHalves(dtype, values, out);
  return out;
}

const codeOf = (f: () => unknown) => {
  try {
    f();
  } catch (e) {
    return isContractError(e) ? e.code : String(e);
  }
  return undefined;
};

describe.skipIf(!found.ok)(`backend.wrap()${why}`, () => {
  for (const [dtype, byteOffset] of [['bf16', 2], ['f16', 6], ['f32', 4]] as const) {
    it(`ropePoolFused on q, k, v of a wrapped fused projection at byteOffset ${byteOffset} = on owned tensors [${dtype}]`, async () => {
      const device = await ownDevice();
      const backend = (await createWebGpuBackend({ device })) as WebGpuBackend;
      try {
        const [N, Hq, H, D, S] = [5, 4, 2, 8, 9];
        const width = (Hq + 2 * H) * D;
        const bits = bitsOf(dtype, random(N * width, 11));
        const wrapped = backend.wrap(applicationBuffer(device, bits, byteOffset), dtype, [N, width], { byteOffset });
        const { q, k, v } = backend.splitQkv(wrapped, { numQoHeads: Hq, numKvHeads: H, headDim: D });
        const owned = backend.tensorFromBits(dtype, [N, Hq + 2 * H, D], bits as never);
        const split = backend.splitQkv(owned, { numQoHeads: Hq, numKvHeads: H, headDim: D });
        const contiguous = await Promise.all([split.q, split.k, split.v].map(async (t) => backend.tensorFromBits(dtype, t.shape, (await backend.readBits(t)) as never)));
        const poolBits = bitsOf(dtype, random(S * H * D, 12));
        const kPoolBuffer = applicationBuffer(device, poolBits, byteOffset);
        const kPool = backend.wrap(kPoolBuffer, dtype, [S, H, D], { byteOffset });
        const [kPool2, vPool, vPool2] = [0, 1, 2].map(() => backend.tensorFromBits(dtype, [S, H, D], poolBits as never));
        const rest = { positions: backend.tensor('i32', [N], [4, 0, 7, 2, 9]), slots: backend.tensor('i32', [N], [3, -1, 0, 8, 3]), numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 10000 };
        const ownedIn = contiguous;
        const a = backend.ropePoolFused({ ...rest, q, k, v, kPool, vPool });
        const b = backend.ropePoolFused({ ...rest, q: ownedIn[0]!, k: ownedIn[1]!, v: ownedIn[2]!, kPool: kPool2!, vPool: vPool2! });
        expect(await backend.readBits(a.qRot)).toEqual(await backend.readBits(b.qRot));
        expect(await backend.readBits(a.kRot)).toEqual(await backend.readBits(b.kRot));
        const written = await backend.readBits(kPool);
        expect(written).toEqual(await backend.readBits(kPool2!));
        expect(await backend.readBits(vPool!)).toEqual(await backend.readBits(vPool2!));
        const range = gpuBufferOf(q);
        expect(range.buffer).toBe(gpuBufferOf(wrapped).buffer);
        expect([range.byteOffset, range.strides]).toEqual([byteOffset, [width, D, 1]]);
        backend.dispose();
        // The application's buffer outlives the backend (kvkit never destroys it): a new backend reads what the op wrote.
        const again = (await createWebGpuBackend({ device })) as WebGpuBackend;
        expect(await again.readBits(again.wrap(kPoolBuffer, dtype, [S, H, D], { byteOffset }))).toEqual(written);
        again.dispose();
      } finally {
        backend.dispose();
        device.destroy();
      }
    }, 60_000);
  }

  it('reads row-strided q, k and v of a fused projection without the strided copy', async () => {
    const backend = (await createWebGpuBackend()) as WebGpuBackend;
    try {
      const [N, Hq, H, D, S] = [6, 4, 2, 8, 8];
      const fused = backend.tensor('f32', [N, (Hq + 2 * H) * D], random(N * (Hq + 2 * H) * D, 3));
      const { q, k, v } = backend.splitQkv(fused, { numQoHeads: Hq, numKvHeads: H, headDim: D });
      const pools = [0, 1].map(() => backend.tensor('f32', [S, H, D], random(S * H * D, 4)));
      const rest = { positions: backend.tensor('i32', [N], [0, 1, 2, 3, 4, 5]), slots: backend.tensor('i32', [N], [0, 1, 2, 3, 4, 5]), numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 10000 };
      const before = webGpuBackendStats(backend).gathers;
      backend.ropePoolFused({ ...rest, q, k, v, kPool: pools[0]!, vPool: pools[1]! });
      expect(webGpuBackendStats(backend).gathers).toBe(before);
      // A transposed k (inner stride 2) is not a fast-path input: it is copied once.
      const kT = backend.view(backend.tensor('f32', [N * H * D], random(N * H * D, 5)), [N, H, D], { strides: [H * D, 1, H] });
      backend.ropePoolFused({ ...rest, q, k: kT, v, kPool: pools[0]!, vPool: pools[1]! });
      expect(webGpuBackendStats(backend).gathers).toBe(before + 1);
      await backend.sync();
    } finally {
      backend.dispose();
    }
  }, 60_000);

  it('a call that reads or writes a wrapped buffer (input, pool, view, output, weights) submits once before it returns; on owned tensors it batches', async () => {
    const device = await ownDevice();
    const backend = (await createWebGpuBackend({ device })) as WebGpuBackend;
    try {
      type Make = (dtype: 'f32' | 'i32', shape: number[], values: readonly number[] | Float32Array) => Tensor;
      const owned: Make = (dtype, shape, values) => backend.tensor(dtype, shape, values);
      // 4 bytes into the application's buffer: no binding starts there, so pools are written through a copy and copied back.
      const wrapped: Make = (dtype, shape, values) => {
        const data = dtype === 'f32' ? Float32Array.from(values) : Int32Array.from(values);
        return backend.wrap(applicationBuffer(device, data, 4), dtype, shape, { byteOffset: 4 });
      };
      const [N, Hq, H, D, S] = [5, 4, 2, 8, 6];
      const rope = (x: { q?: Make; k?: Make; slots?: Make; kPool?: Make }) => ({
        q: (x.q ?? owned)('f32', [N, Hq, D], random(N * Hq * D, 1)),
        k: (x.k ?? owned)('f32', [N, H, D], random(N * H * D, 2)),
        v: owned('f32', [N, H, D], random(N * H * D, 3)),
        positions: owned('i32', [N], [0, 3, 1, 7, 2]),
        slots: (x.slots ?? owned)('i32', [N], [2, 0, 2, 5, -1]),
        kPool: (x.kPool ?? owned)('f32', [S, H, D], random(S * H * D, 4)),
        vPool: owned('f32', [S, H, D], random(S * H * D, 5)),
        numQoHeads: Hq,
        numKvHeads: H,
        headDim: D,
        ropeBase: 10000,
      });
      const [T, L, hidden] = [3, 2, 7];
      const materializer = (kvWeight: Make) =>
        backend.createKvMaterializer({ kvWeight: kvWeight('f32', [L, 2 * H * D, hidden], random(L * 2 * H * D * hidden, 6)), kNormWeight: owned('f32', [L, D], random(L * D, 7)), eps: 1e-6, numKvHeads: H, headDim: D, ropeBase: 10000 });
      const m = materializer(owned);
      const calls: Record<string, (x: Make) => unknown> = {
        'ropePoolFused, q a wrapped input': (x) => backend.ropePoolFused(rope({ q: x })),
        'ropePoolFused, slots a wrapped i32 input': (x) => backend.ropePoolFused(rope({ slots: x })),
        'ropePoolFused, k a transposed view of a wrapped buffer': (x) => backend.ropePoolFused({ ...rope({}), k: backend.view(x('f32', [N * H * D], random(N * H * D, 8)), [N, H, D], { strides: [H * D, 1, H] }) }),
        'ropePoolFused, kPool wrapped': (x) => backend.ropePoolFused(rope({ kPool: x })),
        'fusedNormRopeStacked, kv wrapped': (x) =>
          backend.fusedNormRopeStacked({
            kv: x('f32', [T, L, 2 * H * D], random(T * L * 2 * H * D, 9)),
            kNormWeight: owned('f32', [L, D], random(L * D, 10)),
            eps: owned('f32', [L], [1e-6, 1e-5]),
            cosSinCache: owned('f32', [9, D], random(9 * D, 11)),
            positions: owned('i32', [T], [3, 0, 8]),
            numKvHeads: H,
            headDim: D,
            rotaryDim: D,
          }),
        'createKvMaterializer, kvWeight wrapped': (x) => materializer(x).dispose(),
        'materialize, ctxHidden wrapped': (x) => m.materialize({ ctxHidden: x('f32', [T, hidden], random(T * hidden, 12)), positions: owned('i32', [T], [4, 0, 9]), writeLayerKv: () => {} }),
        'materializeInto, kPool wrapped': (x) =>
          m.materializeInto({
            ctxHidden: owned('f32', [T, hidden], random(T * hidden, 13)),
            positions: owned('i32', [T], [4, 0, 9]),
            slots: owned('i32', [T], [1, 5, 0]),
            kPool: x('f32', [L, S, H, D], random(L * S * H * D, 14)),
            vPool: owned('f32', [L, S, H, D], random(L * S * H * D, 15)),
          }),
        'dequantizeKv, rows wrapped': (x) => backend.dequantizeKv({ pool: owned('f32', [S, H, D], random(S * H * D, 16)), slots: owned('i32', [N], [5, 0, -1, 2, 1]), rows: x('f32', [N, H, D], new Float32Array(N * H * D)) }),
      };
      // Submits during the call on owned tensors, during it on a wrapped one, and then at a flush (none: nothing was left behind).
      const submits = () => webGpuBackendStats(backend).submits;
      const submitted: Record<string, number[]> = {};
      for (const [name, call] of Object.entries(calls)) {
        submitted[name] = [owned, wrapped].map((x) => {
          backend.flush();
          const before = submits();
          call(x);
          return submits() - before;
        });
        const before = submits();
        backend.flush();
        submitted[name]!.push(submits() - before);
      }
      expect(submitted).toEqual(Object.fromEntries(Object.keys(calls).map((name) => [name, [0, 1, 0]])));
      m.dispose();
      await backend.sync();
    } finally {
      backend.dispose();
      device.destroy();
    }
  }, 60_000);

  it('refuses buffers without STORAGE or COPY_SRC, and layouts that do not fit, with their codes', async () => {
    const device = await ownDevice();
    const backend = (await createWebGpuBackend({ device })) as WebGpuBackend;
    try {
      const bits = bitsOf('bf16', random(16, 9));
      const noStorage = device.createBuffer({ size: 64, usage: GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
      expect(codeOf(() => backend.wrap(noStorage, 'bf16', [16]))).toBe('KV049');
      const noCopy = applicationBuffer(device, bits, 0, GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST);
      const t = backend.wrap(noCopy, 'bf16', [16]);
      await expect(backend.readBits(t)).rejects.toMatchObject({ code: 'KV049' });
      const buffer = applicationBuffer(device, bits, 0);
      expect(codeOf(() => backend.wrap(buffer, 'bf16', [16], { byteOffset: 3 }))).toBe('KV046');
      expect(codeOf(() => backend.wrap(buffer, 'f32', [4], { strides: [1, 1] }))).toBe('KV046');
      expect(codeOf(() => backend.wrap(buffer, 'bf16', [16], { byteOffset: buffer.size - 8 }))).toBe('KV047');
      expect(codeOf(() => backend.wrap({ size: 4 } as never, 'f32', [1]))).toBe('KV044');
      // A strided wrap reads back its own elements.
      const strided = backend.wrap(buffer, 'bf16', [4, 2], { byteOffset: 2, strides: [4, 1] });
      const got = await backend.readBits(strided);
      expect(Array.from(got)).toEqual([0, 1, 4, 5, 8, 9, 12, 13].map((i) => bits[1 + i]));
    } finally {
      backend.dispose();
      device.destroy();
    }
  }, 60_000);
});
