import { mropeQkNormCases, runMropeQkNormCase } from '@kvkit/conformance';
import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';

/**
 * The Q/K-norm kernel's other shapes: its three-dispatch form on a device
 * with WebGPU's default eight storage bindings, and its workgroup-memory
 * reduction where subgroups are off. The conformance suite runs every case
 * on the default backend.
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: Q/K-norm tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const skipNote = probe.ok ? '' : ' (skipped: no WebGPU adapter)';
const TIMEOUT_MS = 120_000;

const normed = mropeQkNormCases.filter((c) => (c.qNorm || c.kNorm) && c.N > 0);

let cpu: Backend;
beforeAll(() => {
  cpu = createCpuBackend();
});
afterAll(() => cpu?.dispose());

withDevice(`ropePoolFused with a Q/K-norm, other kernel shapes${skipNote}`, () => {
  it(
    'on a device with the default 8 storage bindings: q, k and v rows in three dispatches, the same answers',
    async () => {
      const found = await findAdapter({}, KERNEL_TOGGLES);
      if (!found.ok) throw new Error(found.reason);
      const device = await found.adapter.requestDevice();
      expect(device.limits.maxStorageBuffersPerShaderStage).toBeLessThan(12);
      const small = await createWebGpuBackend({ device });
      try {
        for (const c of normed) {
          const before = webGpuBackendStats(small).dispatches;
          await runMropeQkNormCase(small, cpu, c, 'bf16');
          // cos/sin table, the slot ownership pass (claim, resolve), then q, k and v rows.
          expect(webGpuBackendStats(small).dispatches - before, c.name).toBe(6);
        }
      } finally {
        small.dispose();
        device.destroy();
      }
    },
    TIMEOUT_MS,
  );

  it(
    'with subgroups off, the sums of squares meet in workgroup memory',
    async () => {
      const workgroupOnly = await createWebGpuBackend({ useSubgroups: false });
      try {
        for (const c of normed) for (const dtype of ['f32', 'f16'] as const) await runMropeQkNormCase(workgroupOnly, cpu, c, dtype);
      } finally {
        workgroupOnly.dispose();
      }
    },
    TIMEOUT_MS,
  );
});
