import { defineResourceSuite } from '@kvkit/conformance';
import { describe, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';

const probe = await probeWebGpu();

if (probe.ok) {
  // SwiftShader runs each dispatch on the CPU: 1 000 calls of each op keep this file under a minute there.
  defineResourceSuite('webgpu', () => createWebGpuBackend(), {
    iterations: 1000,
    fewerBecause: 'the emulated device here is slow',
    buffers: (b) => webGpuBackendStats(b).liveBuffers,
    buffersAreLive: true,
  });
} else {
  console.warn(`kernels-wgsl: resource suite skipped, no WebGPU adapter here: ${probe.reason}`);
  describe.skip(`webgpu resources (skipped: no WebGPU adapter: ${probe.tried})`, () => {
    it('needs an adapter', () => {});
  });
}
