import type { Backend } from '@kvkit/contracts';
import { kernelsOf } from './runtime/createBackend.js';
import type { WebGpuBackendStats } from './runtime/webGpuKernels.js';

export { probeWebGpu, SWIFTSHADER_ICD } from './runtime/adapter.js';
export type { AdapterFound, AdapterMissing, AdapterProbe } from './runtime/adapter.js';
export { createWebGpuBackend } from './runtime/createBackend.js';
export { gpuBufferOf } from './runtime/gpuBufferOf.js';
export type { GpuBufferRange } from './runtime/gpuBufferOf.js';
export type { WebGpuBackendOptions } from './runtime/createBackend.js';
export type { WebGpuBackend, WrapOptions } from './runtime/wrap.js';
export type { WebGpuBackendStats } from './runtime/webGpuKernels.js';
export { roundToBf16, roundToF16 } from '@kvkit/contracts/backend';

/** Buffers and pipelines of a WebGPU backend; a steady-state call leaves `buffersCreated` unchanged. */
export function webGpuBackendStats(backend: Backend): WebGpuBackendStats {
  const kernels = kernelsOf.get(backend);
  if (!kernels) throw new TypeError(`webGpuBackendStats takes a backend made by createWebGpuBackend(); got ${backend?.label ?? String(backend)}`);
  return kernels.stats;
}
