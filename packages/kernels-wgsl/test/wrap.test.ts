/**
 * Tensors over the application's own buffers (`backend.wrap`): at element
 * offsets no binding could start at (2 bytes for bf16, 4 for f32), strided,
 * and as q, k, v of one fused projection, ops give bit-identical results to
 * owned tensors of the same bits; usage flags and bad layouts are refused
 * with their codes. The fast path of ropePoolFused reads row-strided q, k, v
 * without the strided copy.
 */
import { isContractError } from '@kvkit/contracts';
import type { FloatDType } from '@kvkit/contracts';
import { encodeHalves } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '../src/index.js';
import type { WebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { ownDevice, random } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

function bitsOf(dtype: FloatDType, values: Float32Array): Uint16Array | Uint32Array {
  if (dtype === 'f32') return new Uint32Array(values.buffer.slice(0));
  const out = new Uint16Array(values.length);
  encodeHalves(dtype, values, out);
  return out;
}

/** The application's buffer holding `bits` from byte `byteOffset`, written through its own queue. */
function applicationBuffer(device: GPUDevice, bits: Uint16Array | Uint32Array, byteOffset: number, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST): GPUBuffer {
  const size = Math.ceil((byteOffset + bits.byteLength) / 4) * 4 + 4;
  const buffer = device.createBuffer({ size, usage, mappedAtCreation: true });
  new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength), byteOffset);
  buffer.unmap();
  return buffer;
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
