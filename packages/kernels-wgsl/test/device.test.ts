import { isContractError } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createWebGpuBackend, webGpuBackendStats } from '../src/index.js';
import { measureCopyAt, timeOnDevice } from '../src/profiling/index.js';
import { findAdapter, KERNEL_TOGGLES, noAdapterFix } from '../src/runtime/adapter.js';

describe('helpers given a backend that is not a WebGPU one', () => {
  it('refuse it with KV044, naming what they got, before touching it', async () => {
    const cpu = createCpuBackend();
    const calls: [string, () => unknown][] = [
      ['webGpuBackendStats', () => webGpuBackendStats(cpu)],
      ['webGpuBackendStats', () => webGpuBackendStats(undefined as never)],
      ['timeOnDevice', () => timeOnDevice(cpu, () => {})],
      ['measureCopyAt', () => measureCopyAt(cpu, { copy: 'webgpu-copy-x1', bytes: 1 << 20 })],
    ];
    for (const [call, run] of calls) {
      const error = await Promise.resolve()
        .then(run)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(isContractError(error), String(error)).toBe(true);
      expect(error).toMatchObject({ code: 'KV044', op: call });
      expect((error as Error).message).toMatch(/backend must be a backend made by createWebGpuBackend\(\); got (cpu backend #\d+|undefined)\./);
    }
    cpu.dispose();
  });
});

describe('no WebGPU adapter', () => {
  it('is KV050, with how to get one, when the WebGPU entry point has no adapter', async () => {
    const error = await createWebGpuBackend({ gpu: { requestAdapter: async () => null } }).catch((e: unknown) => e);
    expect(isContractError(error)).toBe(true);
    expect(error).toMatchObject({ code: 'KV050', op: 'createWebGpuBackend' });
    expect((error as Error).message).toMatch(/returned null/);
    // This runs in Node: the advice is Node's, a Vulkan driver or SwiftShader for Dawn.
    expect((error as Error).message).toContain(noAdapterFix('node'));
    expect((error as Error).message).toMatch(/chromium|SwiftShader/);
  });

  it("advises a browser to switch WebGPU on, and Node to install a Vulkan driver, never the other's fix", () => {
    const browser = noAdapterFix('browser');
    expect(browser).toMatch(/WebGPU switched on/);
    expect(browser).not.toMatch(/Debian|chromium package|VK_ICD_FILENAMES|Vulkan/);
    expect(noAdapterFix('node')).toMatch(/VK_ICD_FILENAMES/);
    expect(noAdapterFix('node')).not.toMatch(/browser/);
  });

  it('is KV050, not a crash, when requestAdapter itself throws', async () => {
    const gpu = {
      requestAdapter: async () => {
        throw new Error('WebGPU is disabled');
      },
    };
    await expect(createWebGpuBackend({ gpu })).rejects.toMatchObject({ code: 'KV050', message: expect.stringContaining('WebGPU is disabled') });
  });
});

const found = await findAdapter({}, KERNEL_TOGGLES);

describe.skipIf(!found.ok)(`a device passed in and then lost${found.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  async function ownDevice(): Promise<GPUDevice> {
    if (!found.ok) throw new Error(found.reason);
    // A fresh adapter per device: an adapter gives one device only.
    const again = await findAdapter({}, KERNEL_TOGGLES);
    if (!again.ok) throw new Error(again.reason);
    return again.adapter.requestDevice();
  }

  it('runs on the caller’s device, and backend.dispose() leaves that device usable', async () => {
    const device = await ownDevice();
    const backend = await createWebGpuBackend({ device });
    const t = backend.tensor('f32', [3], [1, 2, 3]);
    expect(Array.from((await backend.read(t)) as Float32Array)).toEqual([1, 2, 3]);
    backend.dispose();
    expect(t.disposed).toBe(true);
    const buffer = device.createBuffer({ size: 16, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    await buffer.mapAsync(GPUMapMode.READ);
    buffer.unmap();
    device.destroy();
  });

  it('once device.lost settles after device.destroy(), every call throws KV051 at once: tensor, ops, read, sync', async () => {
    const device = await ownDevice();
    const backend = await createWebGpuBackend({ device });
    const kept = backend.tensor('f32', [4], [1, 2, 3, 4]);
    const rope = {
      q: backend.tensor('f32', [2, 1, 4], [1, 2, 3, 4, 5, 6, 7, 8]),
      k: backend.tensor('f32', [2, 1, 4], [1, 2, 3, 4, 5, 6, 7, 8]),
      v: backend.tensor('f32', [2, 1, 4], [1, 2, 3, 4, 5, 6, 7, 8]),
      positions: backend.tensor('i32', [2], [0, 1]),
      slots: backend.tensor('i32', [2], [1, 0]),
      kPool: backend.empty('f32', [2, 1, 4]),
      vPool: backend.empty('f32', [2, 1, 4]),
      headDim: 4,
      numQoHeads: 1,
      numKvHeads: 1,
      ropeBase: 10000,
    };
    const materializer = { kvWeight: backend.tensor('f32', [1, 4, 4], new Float32Array(16).fill(0.5)), kNormWeight: backend.tensor('f32', [1, 2], [1, 1]), eps: 1e-6, numKvHeads: 1, headDim: 2, ropeBase: 10000 };
    expect(() => backend.ropePoolFused(rope)).not.toThrow();
    device.destroy();
    await device.lost;
    expect(() => backend.tensor('f32', [2], [1, 2])).toThrow(expect.objectContaining({ code: 'KV051', op: 'tensor' }));
    expect(() => backend.empty('bf16', [2])).toThrow(expect.objectContaining({ code: 'KV051' }));
    expect(() => backend.ropePoolFused(rope)).toThrow(expect.objectContaining({ code: 'KV051', op: 'ropePoolFused' }));
    expect(() => backend.createKvMaterializer(materializer)).toThrow(
      expect.objectContaining({ code: 'KV051', op: 'createKvMaterializer' }),
    );
    await expect(backend.read(kept)).rejects.toMatchObject({ code: 'KV051', op: 'read' });
    await expect(backend.sync()).rejects.toMatchObject({ code: 'KV051', op: 'sync', message: expect.stringContaining('destroyed by its owner') });
    backend.dispose();
  });

  it('a read in flight when the device goes away rejects with KV051 instead of hanging', async () => {
    const device = await ownDevice();
    const backend = await createWebGpuBackend({ device });
    const t = backend.tensor('f32', [1 << 16], new Float32Array(1 << 16).fill(2));
    const pending = backend.read(t);
    device.destroy();
    const outcome = await pending.then(
      (data) => ({ data }),
      (error: unknown) => ({ error }),
    );
    // Either the copy finished before the loss, or the read says why it cannot.
    if ('error' in outcome) expect(outcome.error).toMatchObject({ code: 'KV051' });
    else expect((outcome.data as Float32Array)[5]).toBe(2);
    backend.dispose();
  });
});

describe.skipIf(!found.ok)(`a backend's own device${found.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('dispose() destroys its buffers: tensors read as disposed and calls on them throw KV003', async () => {
    const backend = await createWebGpuBackend();
    const t = backend.tensor('i64', [2], [5n, -7n]);
    expect(Array.from((await backend.read(t)) as BigInt64Array)).toEqual([5n, -7n]);
    expect(webGpuBackendStats(backend).liveBuffers).toBeGreaterThan(0);
    backend.dispose();
    expect(t.disposed).toBe(true);
    await expect(backend.read(t)).rejects.toMatchObject({ code: 'KV003' });
    expect(webGpuBackendStats(backend).liveBuffers).toBe(0);
  });
});

describe.skipIf(!found.ok)(`the largest tensor${found.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('is the device binding size, named in KV045 per dtype, and nothing is allocated past it', async () => {
    const backend = await createWebGpuBackend();
    try {
      const before = webGpuBackendStats(backend).buffersCreated;
      const limits: Record<string, number> = {};
      for (const [dtype, bytes] of [['f32', 4], ['bf16', 2], ['i64', 8]] as const) {
        let message = '';
        try {
          backend.empty(dtype, [2 ** 20, 2 ** 16]); // 2^36 elements: past any device's binding
        } catch (e) {
          expect(isContractError(e)).toBe(true);
          message = (e as Error).message;
        }
        const found = /at most (\d+) elements \(this device binds at most (\d+) bytes: its (maxStorageBufferBindingSize|maxBufferSize)\)/.exec(message);
        expect(found, message).not.toBeNull();
        expect(Number(found![1])).toBe(Math.floor(Number(found![2]) / bytes));
        limits[dtype] = Number(found![2]);
      }
      expect(new Set(Object.values(limits)).size).toBe(1);
      expect(webGpuBackendStats(backend).buffersCreated).toBe(before);
    } finally {
      backend.dispose();
    }
  });

  it('reads a tensor of several staging chunks (64 MiB each) whole: rows on both sides of each chunk edge, as written', async () => {
    const backend = await createWebGpuBackend();
    try {
      // [80000, 8, 128] bf16: 164 MB stored in three chunks, whose edges fall between rows 32767 and 32768, 65535 and 65536.
      const [S, H, D] = [80_000, 8, 128];
      const row = H * D;
      const slots = [0, 32_767, 32_768, 65_535, 65_536, S - 1];
      const N = slots.length;
      const v = backend.tensor('bf16', [N, H, D], Float32Array.from({ length: N * row }, (_, i) => ((i % 977) - 488) / 64));
      const kPool = backend.empty('bf16', [S, H, D]);
      const vPool = backend.empty('bf16', [S, H, D]);
      const out = backend.ropePoolFused({
        q: backend.tensor('bf16', [N, H, D]),
        k: backend.tensor('bf16', [N, H, D]),
        v,
        positions: backend.tensor('i32', [N], new Int32Array(N)),
        slots: backend.tensor('i32', [N], Int32Array.from(slots)),
        kPool,
        vPool,
        numQoHeads: H,
        numKvHeads: H,
        headDim: D,
        ropeBase: 10_000,
      });
      const [values, bits, vValues, vBits] = await Promise.all([backend.read(vPool), backend.readBits(vPool), backend.read(v), backend.readBits(v)]);
      expect([values.length, bits.length]).toEqual([S * row, S * row]);
      for (const [n, slot] of slots.entries()) {
        expect(values.subarray(slot * row, (slot + 1) * row)).toEqual(vValues.subarray(n * row, (n + 1) * row));
        expect(bits.subarray(slot * row, (slot + 1) * row)).toEqual(vBits.subarray(n * row, (n + 1) * row));
      }
      for (const slot of [1, 32_769, 65_534, S - 2]) expect(values.subarray(slot * row, (slot + 1) * row).every((x) => x === 0)).toBe(true);
      for (const t of [out.qRot, out.kRot, kPool, vPool]) t.dispose();
    } finally {
      backend.dispose();
    }
  });
});

