import { isContractError } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { createWebGpuBackend, webGpuBackendStats } from '../src/index.js';
import { measureCopyAt, measureCopyCeilings } from '../src/profiling/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';

const found = await findAdapter({}, KERNEL_TOGGLES);

describe.skipIf(!found.ok)(`a copy timed at a benchmark row's size${found.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('runs each copy of the ceilings on buffers of half the bytes, rotated over the pairs asked for, and frees them', async () => {
    const backend = await createWebGpuBackend();
    try {
      const names = (await measureCopyCeilings(backend, 1 << 20)).map((c) => c.name);
      expect(names).toEqual(['webgpu-copy-x1', 'webgpu-copy-x2', 'webgpu-copy-x4']);
      for (const copy of names) {
        const before = webGpuBackendStats(backend);
        // 3 MiB + 48 bytes moved: two 16-byte-aligned halves of 1.5 MiB + 16, three pairs of them.
        const sized = await measureCopyAt(backend, { copy, bytes: 3 * (1 << 20) + 48, copies: 3, reps: 4 });
        expect(sized.name).toBe(copy);
        expect(sized.timing.samplesUs).toHaveLength(4);
        expect(sized.gbs).toBeCloseTo((3 * (1 << 20) + 32) / (sized.timing.medianUs * 1e3), 9);
        const after = webGpuBackendStats(backend);
        expect(after.buffersCreated - before.buffersCreated).toBeGreaterThanOrEqual(6);
        expect(after.liveBuffers).toBe(before.liveBuffers);
      }
    } finally {
      backend.dispose();
    }
  }, 120_000);

  it('refuses a copy it does not have with KV009, naming the ones it has, before allocating', async () => {
    const backend = await createWebGpuBackend();
    try {
      const before = webGpuBackendStats(backend).buffersCreated;
      const error = await measureCopyAt(backend, { copy: 'cuMemcpyDtoDAsync', bytes: 1 << 20 }).catch((e: unknown) => e);
      expect(isContractError(error)).toBe(true);
      expect(error).toMatchObject({ code: 'KV009', op: 'measureCopyAt' });
      expect((error as Error).message).toContain("'webgpu-copy-x4'");
      expect(webGpuBackendStats(backend).buffersCreated).toBe(before);
    } finally {
      backend.dispose();
    }
  });
});
