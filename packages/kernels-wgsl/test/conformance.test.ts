import { defineConformanceSuite, definePropertySuite, defineValidationSuite } from '@kvkit/conformance';
import { describe, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu } from '../src/index.js';

const probe = await probeWebGpu();

if (probe.ok) {
  defineConformanceSuite('webgpu', () => createWebGpuBackend(), { dtypes: ['f32', 'f16', 'bf16'] });
  defineValidationSuite('webgpu', () => createWebGpuBackend());
  definePropertySuite('webgpu', () => createWebGpuBackend(), { runs: { valid: 20, broken: 300, interleaved: 8, readSide: 15, readSideBroken: 90 } });
} else {
  console.warn(`kernels-wgsl: conformance skipped, no WebGPU adapter here: ${probe.reason}`);
  describe.skip(`webgpu conformance (skipped: no WebGPU adapter: ${probe.tried})`, () => {
    it('needs an adapter', () => {});
  });
}
