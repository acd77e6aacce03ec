import { expect } from 'vitest';
import { createWebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';

type WebGpuBackend = Awaited<ReturnType<typeof createWebGpuBackend>>;

/**
 * Runs `body` on a backend over a device made with WebGPU's default limits:
 * 8 storage bindings a stage, fewer than the one-dispatch forms of the row
 * kernels take (10 or 11), so they run in parts. Disposes both afterwards.
 */
export async function onDefaultLimits(body: (backend: WebGpuBackend, device: GPUDevice) => Promise<void>): Promise<void> {
  const found = await findAdapter({}, KERNEL_TOGGLES);
  if (!found.ok) throw new Error(found.reason);
  const device = await found.adapter.requestDevice();
  expect(device.limits.maxStorageBuffersPerShaderStage).toBeLessThan(10);
  const backend = await createWebGpuBackend({ device });
  try {
    await body(backend, device);
  } finally {
    backend.dispose();
    device.destroy();
  }
}
