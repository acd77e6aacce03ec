/**
 * Device faults on WebGPU become coded errors on the next call, never a hang:
 * a device destroyed by its owner or lost otherwise (KV051), a kernel whose
 * WGSL or pipeline does not build (KV055, with the compiler's messages).
 */
import type { Backend } from '@kvkit/contracts';
import { isContractError } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { kernelsOf } from '../src/runtime/createBackend.js';
import type { KernelPlan } from '../src/shaders/plan.js';
import { ownDevice, random, ropeArgs } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

/** What `p` rejected with, or a failure when it resolves or neither settles in time. */
async function rejection(what: string, p: Promise<unknown>, ms = 10_000): Promise<Error & { code?: string; op?: string; details?: Record<string, unknown> }> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    const settled = await Promise.race([p.then(() => 'resolved' as const), late]);
    throw new Error(`${what}: ${settled === 'late' ? `neither settled nor failed within ${ms} ms` : 'resolved'}`);
  } catch (e) {
    if ((e as Error).message.startsWith(`${what}: `)) throw e;
    return e as Error;
  } finally {
    clearTimeout(timer);
  }
}

/** A materializer's arguments and one of its calls' (hidden 5, 2 heads of 4, T = 3), made while the device lives. */
function materializerArgs(b: Backend, seed: number) {
  const create = { kvWeight: b.tensor('f32', [1, 16, 5], random(80, seed)), kNormWeight: b.tensor('f32', [1, 4], random(4, seed + 1)), eps: 1e-6, numKvHeads: 2, headDim: 4, ropeBase: 10000 };
  const call = { ctxHidden: b.tensor('f32', [3, 5], random(15, seed + 2)), positions: b.tensor('i32', [3], [4, 0, 9]), writeLayerKv: () => {} };
  const materializer = b.createKvMaterializer(create as never) as unknown as { materialize(a: unknown): void };
  return { create, call, materializer };
}

/** Every later call throws KV051 at once, naming itself, with `reason` in the message. */
async function everyCallIsLost(b: Backend, kept: ReturnType<typeof ropeArgs>, m: ReturnType<typeof materializerArgs>, reason: RegExp): Promise<void> {
  const lost = (op: string) => expect.objectContaining({ code: 'KV051', op, message: expect.stringMatching(reason) });
  expect(() => b.tensor('f32', [2], [1, 2])).toThrow(lost('tensor'));
  expect(() => b.empty('i32', [3])).toThrow(lost('empty'));
  expect(() => b.ropePoolFused(kept)).toThrow(lost('ropePoolFused'));
  expect(() => b.createKvMaterializer(m.create as never)).toThrow(lost('createKvMaterializer'));
  expect(() => b.flush()).toThrow(lost('flush'));
  expect(() => m.materializer.materialize(m.call)).toThrow(lost('KvMaterializer.materialize'));
  expect(await rejection('read after the loss', b.read(kept.kPool))).toMatchObject({ code: 'KV051', op: 'read' });
  expect(await rejection('sync after the loss', b.sync())).toMatchObject({ code: 'KV051', op: 'sync' });
}

describe.skipIf(!found.ok)(`a device lost mid-run${why}`, () => {
  it('device.destroy() by its owner with ops enqueued and a read pending: the read rejects with KV051, and so does every later call', async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const args = ropeArgs(b, 1);
    const materializer = materializerArgs(b, 2);
    for (let i = 0; i < 3; i++) b.ropePoolFused(args);
    const pending = b.read(args.kPool);
    device.destroy();
    expect(await rejection('the pending read', pending)).toMatchObject({ code: 'KV051', op: 'read', message: expect.stringContaining('destroyed by its owner') });
    await everyCallIsLost(b, args, materializer, /destroyed by its owner/);
    b.dispose();
  });

  it('device.destroy() by its owner while a sync waits: the sync rejects with KV051', async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const args = ropeArgs(b, 3);
    for (let i = 0; i < 4; i++) b.ropePoolFused(args);
    const pending = b.sync();
    device.destroy();
    expect(await rejection('the pending sync', pending)).toMatchObject({ code: 'KV051', op: 'sync' });
    b.dispose();
  });

  it('a device the driver loses (lost resolves, the device object still answers): the pending read rejects with KV051 naming the cause', async () => {
    const real = await ownDevice();
    let lose: (info: GPUDeviceLostInfo) => void = () => {};
    const lost = new Promise<GPUDeviceLostInfo>((resolve) => {
      lose = resolve;
    });
    // The device as an application may hand it over; its `lost` settles when the test says so.
    const device = new Proxy(real, {
      get(target, key) {
        if (key === 'lost') return lost;
        const value = Reflect.get(target, key, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const b = await createWebGpuBackend({ device });
    const args = ropeArgs(b, 7);
    const materializer = materializerArgs(b, 8);
    b.ropePoolFused(args);
    const pending = b.read(args.kPool);
    lose({ reason: 'unknown', message: 'the GPU was reset after a timeout' } as GPUDeviceLostInfo);
    expect(await rejection('the pending read', pending)).toMatchObject({ code: 'KV051', op: 'read', message: expect.stringContaining('the GPU was reset after a timeout') });
    await everyCallIsLost(b, args, materializer, /the GPU was reset after a timeout/);
    b.dispose();
    real.destroy();
  });

  it('a device passed in keeps its own methods and listeners: kvkit adds none, and still hears of destroy() through device.lost', async () => {
    const device = await ownDevice();
    const originalDestroy = device.destroy;
    const added: string[] = [];
    type Listen = (type: string, fn: unknown, options?: unknown) => void;
    const add = device.addEventListener.bind(device) as Listen;
    device.addEventListener = ((type: string, fn: unknown, options?: unknown) => {
      added.push(type);
      add(type, fn, options);
    }) as typeof device.addEventListener;
    const first = await createWebGpuBackend({ device });
    const second = await createWebGpuBackend({ device });
    const args = ropeArgs(second, 9);
    const materializer = materializerArgs(second, 10);
    second.ropePoolFused(args);
    expect(added).toEqual([]);
    expect(device.destroy).toBe(originalDestroy);
    expect(Object.hasOwn(device, 'destroy')).toBe(false);
    first.dispose();
    device.destroy();
    await device.lost;
    await everyCallIsLost(second, args, materializer, /destroyed by its owner/);
    second.dispose();
  });
});

/** A kernel the runtime builds from `code`: one read-write binding, no uniforms used. */
function brokenKernel(b: Backend, name: string, code: string) {
  const k = kernelsOf.get(b)!;
  const plan = { kernel: name } as unknown as KernelPlan;
  const build = () => ({ code, bindings: [{ name: 'out', access: 'read_write' as const }], writeUniforms: () => {} });
  const target = k.allocate('f32', [16]);
  const dispatch = () => k.runtime.dispatch(k.runtime.kernel(plan, build), { out: target.storage.range(0, 64) }, {}, 1);
  return { k, dispatch, target };
}

describe.skipIf(!found.ok)(`a kernel that does not build${why}`, () => {
  it('a WGSL compile error: the next sync throws KV055 with line:column and the compiler message; the kernel then fails at once, other work runs', async () => {
    const b = await createWebGpuBackend();
    try {
      const { k, dispatch } = brokenKernel(b, 'brokenParse', '@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n@compute @workgroup_size(1)\nfn main() {\n  out[0] = undefined_name;\n}\n');
      dispatch();
      const e = await rejection('sync after a broken kernel', b.sync());
      expect(isContractError(e)).toBe(true);
      expect(e).toMatchObject({ code: 'KV055', op: 'sync', details: { kernel: 'brokenParse' } });
      expect(String(e.details?.log)).toMatch(/^4:\d+ .*undefined_name/);
      expect(e.message).toContain('undefined_name');
      // Reported once; the same kernel now fails where it is asked for, naming the entry point in progress.
      await b.sync();
      k.assertLive('ropePoolFused');
      expect(() => dispatch()).toThrow(expect.objectContaining({ code: 'KV055', op: 'ropePoolFused' }));
      const args = ropeArgs(b, 11);
      b.ropePoolFused(args);
      await b.sync();
      expect(((await b.read(args.vPool)) as Float32Array).length).toBe(4 * 3 * 6);
    } finally {
      b.dispose();
    }
  });

  it('a pipeline the device refuses (no entry point main): the next read throws KV055 with the validation message', async () => {
    const b = await createWebGpuBackend();
    try {
      const { dispatch, target } = brokenKernel(b, 'brokenPipeline', '@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n@compute @workgroup_size(1)\nfn other() {\n  out[0] = 1.0;\n}\n');
      dispatch();
      const e = await rejection('read after a broken pipeline', b.read(target));
      expect(e).toMatchObject({ code: 'KV055', op: 'read', details: { kernel: 'brokenPipeline' } });
      expect(String(e.details?.log)).toMatch(/main/);
      await b.sync();
    } finally {
      b.dispose();
    }
  });

  it('shaders broken on the way to the device (a wrapped createShaderModule): the op runs, sync throws KV055, the op then throws it at once', async () => {
    const device = await ownDevice();
    const build = device.createShaderModule.bind(device);
    device.createShaderModule = (descriptor) => build({ ...descriptor, code: `${descriptor.code}\nfn traced( {}` });
    const b = await createWebGpuBackend({ device });
    try {
      const args = ropeArgs(b, 13);
      b.ropePoolFused(args);
      const e = await rejection('sync after the op', b.sync());
      expect(e).toMatchObject({ code: 'KV055', op: 'sync' });
      expect(String(e.details?.log)).toMatch(/^\d+:\d+ /);
      expect(() => b.ropePoolFused(args)).toThrow(expect.objectContaining({ code: 'KV055', op: 'ropePoolFused' }));
    } finally {
      b.dispose();
      device.destroy();
    }
  });
});
