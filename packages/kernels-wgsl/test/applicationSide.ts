/**
 * What the application's side of a shared-device test needs: a device of its
 * own, buffers it fills and copies with its own queue, random data, and one
 * small ropePoolFused call (odd sizes, a contested slot).
 */
import type { Backend } from '@kvkit/contracts';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';

/** A device of the test's own; `largest` asks for the adapter's largest buffers (so kvkit may ask for more than the device holds). */
export async function ownDevice(options: { largest?: boolean } = {}): Promise<GPUDevice> {
  // A fresh adapter per device: an adapter gives one device only.
  const again = await findAdapter({}, KERNEL_TOGGLES);
  if (!again.ok) throw new Error(again.reason);
  if (!options.largest) return again.adapter.requestDevice();
  const { maxBufferSize, maxStorageBufferBindingSize } = again.adapter.limits;
  return again.adapter.requestDevice({ requiredLimits: { maxBufferSize, maxStorageBufferBindingSize } });
}

/** The application's buffer holding `bits` from byte `byteOffset` (mapped at creation), with room to spare after them. */
export function applicationBuffer(device: GPUDevice, bits: ArrayBufferView, byteOffset = 0, usage = GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST): GPUBuffer {
  const size = Math.ceil((byteOffset + bits.byteLength) / 4) * 4 + 4;
  const buffer = device.createBuffer({ size, usage, mappedAtCreation: true });
  new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength), byteOffset);
  buffer.unmap();
  return buffer;
}

/** Copies `bytes` at `offset` of `buffer` into a MAP_READ buffer in a submit of the application's own; `words` maps it. */
export function applicationCopy(device: GPUDevice, buffer: GPUBuffer, offset: number, bytes: number): { words(): Promise<Uint32Array> } {
  const readback = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, offset, readback, 0, bytes);
  device.queue.submit([encoder.finish()]);
  return {
    async words() {
      await readback.mapAsync(GPUMapMode.READ);
      const out = new Uint32Array(readback.getMappedRange().slice(0));
      readback.destroy();
      return out;
    },
  };
}

export function random(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  return Float32Array.from({ length: n }, () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return (s / 2 ** 32) * 2 - 1;
  });
}

export function ropeArgs(b: Backend, seed: number) {
  const [N, H, D, S] = [5, 3, 6, 4];
  return {
    q: b.tensor('f32', [N, H, D], random(N * H * D, seed)),
    k: b.tensor('f32', [N, H, D], random(N * H * D, seed + 1)),
    v: b.tensor('f32', [N, H, D], random(N * H * D, seed + 2)),
    positions: b.tensor('i32', [N], [0, 3, 1, 7, 2]),
    slots: b.tensor('i32', [N], [2, 0, 2, 3, -1]),
    kPool: b.tensor('f32', [S, H, D], random(S * H * D, seed + 3)),
    vPool: b.tensor('f32', [S, H, D], random(S * H * D, seed + 4)),
    headDim: D,
    numQoHeads: H,
    numKvHeads: H,
    ropeBase: 10000,
  };
}
