/**
 * backend.flush() and the application's own queue: after flush(), a submit
 * of the application's runs after every op called before it, so its copy of
 * an output sees the op's results and its writes to an input do not reach
 * the op. gpuBufferOf hands the application those buffers.
 */
import { isContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import type { Backend } from '@kvkit/contracts';
import { ownDevice, random } from './applicationSide.js';

const found = await findAdapter({}, KERNEL_TOGGLES);
const why = found.ok ? '' : ' (skipped: no WebGPU adapter)';

const [T, L, H, D, R, P] = [5, 3, 2, 6, 4, 9];

/** fusedNormRopeStacked arguments on random data; `kv` is f32 so the application can overwrite it with its own words. */
function normRopeArgs(b: Backend, seed: number) {
  return {
    kv: b.tensor('f32', [T, L, 2 * H * D], random(T * L * 2 * H * D, seed)),
    kNormWeight: b.tensor('f32', [L, D], random(L * D, seed + 1)),
    eps: b.tensor('f32', [L], [1e-6, 1e-5, 1e-4]),
    cosSinCache: b.tensor('f32', [P, R], random(P * R, seed + 2)),
    positions: b.tensor('i32', [T], [3, 0, 8, 3, 5]),
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
  };
}

/** The application's own copy of `bytes` at `offset` of `buffer`, encoded and submitted by it, then mapped. */
async function applicationCopy(device: GPUDevice, buffer: GPUBuffer, offset: number, bytes: number): Promise<Float32Array> {
  const readback = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, offset, readback, 0, bytes);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const out = new Float32Array(readback.getMappedRange().slice(0));
  readback.destroy();
  return out;
}

describe.skipIf(!found.ok)(`flush() and the application's own submits${why}`, () => {
  it("an application's copy of kOut submitted right after flush() reads the op's results", async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const args = normRopeArgs(b, 11);
    const { kOut, vOut } = b.fusedNormRopeStacked(args);
    b.flush();
    const out = gpuBufferOf(kOut);
    expect(out.byteLength).toBe(L * T * H * D * 4);
    expect(out.strides).toEqual([T * H * D, H * D, D, 1]);
    const copied = await applicationCopy(device, out.buffer, out.byteOffset, out.byteLength);
    expect(copied.some((x) => x !== 0)).toBe(true);
    expect(Array.from(copied)).toEqual(Array.from((await b.read(kOut)) as Float32Array));
    // V is K's neighbour in kv and is copied bit for bit: the application sees it as written.
    const vRange = gpuBufferOf(vOut);
    const v = await applicationCopy(device, vRange.buffer, vRange.byteOffset, vRange.byteLength);
    const kv = random(T * L * 2 * H * D, 11);
    for (const [l, t, h, d] of [[0, 0, 0, 0], [2, 4, 1, 5], [1, 3, 0, 2]] as const) {
      expect(v[((l * T + t) * H + h) * D + d]).toBe(kv[(t * L + l) * 2 * H * D + (H + h) * D + d]);
    }
    await b.sync();
    b.dispose();
    device.destroy();
  });

  it('writing kv with queue.writeBuffer after the call and flush() leaves the result that of the kv the call saw', async () => {
    const device = await ownDevice();
    const b = await createWebGpuBackend({ device });
    const cpu = createCpuBackend();
    const args = normRopeArgs(b, 21);
    const before = (await b.read(b.fusedNormRopeStacked(args).kOut)) as Float32Array;
    const { kOut } = b.fusedNormRopeStacked(args);
    b.flush();
    const kv = gpuBufferOf(args.kv);
    const other = random(T * L * 2 * H * D, 99);
    device.queue.writeBuffer(kv.buffer, kv.byteOffset, other);
    expect(Array.from((await b.read(kOut)) as Float32Array)).toEqual(Array.from(before));
    // And the write did land: the next call sees the new kv, as the CPU reference computes it.
    const after = (await b.read(b.fusedNormRopeStacked(args).kOut)) as Float32Array;
    const reference = (await cpu.read(cpu.fusedNormRopeStacked({ ...normRopeArgs(cpu, 21), kv: cpu.tensor('f32', [T, L, 2 * H * D], other) }).kOut)) as Float32Array;
    for (let i = 0; i < reference.length; i++) expect(after[i]).toBeCloseTo(reference[i]!, 4);
    expect(Array.from(after)).not.toEqual(Array.from(before));
    await b.sync();
    b.dispose();
    cpu.dispose();
    device.destroy();
  });

  it('submits once for the ops called since the last submit, and nothing when none was', async () => {
    const b = await createWebGpuBackend();
    const args = normRopeArgs(b, 31);
    b.flush();
    const idle = webGpuBackendStats(b).submits;
    b.flush();
    expect(webGpuBackendStats(b).submits).toBe(idle);
    for (let i = 0; i < 7; i++) b.fusedNormRopeStacked(args);
    b.flush();
    expect(webGpuBackendStats(b).submits).toBe(idle + 1);
    await b.sync();
    b.dispose();
    expect(() => b.flush()).toThrow(expect.objectContaining({ code: 'KV003', op: 'flush' }));
  });
});

describe.skipIf(!found.ok)(`gpuBufferOf${why}`, () => {
  it("is refused with a code for what is not a live WebGPU tensor: KV001, KV002 (another backend's), KV003", async () => {
    const b = await createWebGpuBackend();
    const cpu = createCpuBackend();
    const code = (f: () => unknown) => {
      try {
        f();
      } catch (e) {
        return isContractError(e) ? `${e.code} ${e.op}` : String(e);
      }
      return 'no error';
    };
    expect(code(() => gpuBufferOf({} as never))).toBe('KV001 gpuBufferOf');
    expect(code(() => gpuBufferOf(cpu.tensor('f32', [2], [1, 2])))).toBe('KV002 gpuBufferOf');
    const t = b.tensor('bf16', [3, 5], random(15, 41));
    expect(gpuBufferOf(t)).toMatchObject({ byteOffset: 0, byteLength: 30, strides: [5, 1] });
    t.dispose();
    expect(code(() => gpuBufferOf(t))).toBe('KV003 gpuBufferOf');
    b.dispose();
    cpu.dispose();
  });
});
