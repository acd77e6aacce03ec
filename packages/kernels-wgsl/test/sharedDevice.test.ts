/**
 * A device passed in stays the application's: kvkit hears of its own
 * validation and out-of-memory errors through error scopes around its own
 * calls, so the application's errors are never reported as kvkit's, and
 * kvkit's own out-of-memory is still KV054 at the next sync. Sharing the
 * device alone does not make calls submit: ops on kvkit's own tensors batch.
 */
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, webGpuBackendStats } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { ownDevice, random, ropeArgs } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

/** A buffer no device may make: MAP_READ goes only with COPY_DST. */
const invalidBuffer = { size: 16, usage: 0x0001 | 0x0080 }; // MAP_READ | STORAGE

describe.skipIf(!found.ok)(`a device shared with the application${why}`, () => {
  it("the application's own invalid createBuffer is not reported by kvkit's next sync(), and reaches the application", async () => {
    const device = await ownDevice({ largest: true });
    const heard: string[] = [];
    device.addEventListener('uncapturederror', (e) => heard.push((e as GPUUncapturedErrorEvent).error.message));
    const b = await createWebGpuBackend({ device });
    const args = ropeArgs(b, 1);
    const expected = await b.read(b.ropePoolFused(args).qRot);
    // Around kvkit's calls, inside the application's own scope, and in a materializer's callback.
    device.createBuffer(invalidBuffer);
    device.pushErrorScope('validation');
    const { qRot } = b.ropePoolFused(args);
    device.createBuffer(invalidBuffer);
    const scoped = await device.popErrorScope();
    const materializer = b.createKvMaterializer({ kvWeight: b.tensor('f32', [1, 16, 5], random(80, 2)), kNormWeight: b.tensor('f32', [1, 4], random(4, 3)), eps: 1e-6, numKvHeads: 2, headDim: 4, ropeBase: 10000 });
    materializer.materialize({ ctxHidden: b.tensor('f32', [3, 5], random(15, 4)), positions: b.tensor('i32', [3], [4, 0, 9]), writeLayerKv: () => void device.createBuffer(invalidBuffer) });
    await expect(b.sync()).resolves.toBeUndefined();
    expect(scoped?.message).toMatch(/usage/i);
    expect(Array.from((await b.read(qRot)) as Float32Array)).toEqual(Array.from(expected as Float32Array));
    for (let i = 0; i < 100 && heard.length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(heard.length).toBe(2);
    b.dispose();
    device.destroy();
  });

  it("ops on kvkit's own tensors batch on a device passed in: one submit at flush() for many calls", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const args = ropeArgs(b, 9);
    b.flush();
    const before = webGpuBackendStats(b).submits;
    for (let i = 0; i < 7; i++) b.ropePoolFused(args);
    expect(webGpuBackendStats(b).submits).toBe(before);
    b.flush();
    expect(webGpuBackendStats(b).submits).toBe(before + 1);
    await b.sync();
    b.dispose();
    device.destroy();
  });

  for (const which of ['passed in', 'its own'] as const) {
    it(`kvkit's own out-of-memory on a device ${which} is KV054 at the next sync; the sync after is clean and ops still run`, async () => {
      const device = which === 'passed in' ? await ownDevice({ largest: true }) : undefined;
      const b = await createWebGpuBackend(device ? { device } : {});
      const pools = [];
      for (let i = 0; i < 200; i++) pools.push(b.empty('f32', [2 ** 28])); // 200 GiB: more than any device here holds
      await expect(b.sync()).rejects.toMatchObject({ code: 'KV054', op: 'sync' });
      for (const p of pools) p.dispose();
      await expect(b.sync()).resolves.toBeUndefined();
      const args = ropeArgs(b, 5);
      const { kRot } = b.ropePoolFused(args);
      expect(((await b.read(kRot)) as Float32Array).some((x) => x !== 0)).toBe(true);
      b.dispose();
      device?.destroy();
    });
  }
});
