import type { Backend } from '@kvkit/contracts';
import { webGpuKernelsOf } from './runtime/registry.js';
import type { WebGpuBackendStats } from './runtime/webGpuKernels.js';

export { probeWebGpu, SWIFTSHADER_ICD } from './runtime/adapter.js';
export type { AdapterFound, AdapterMissing, AdapterProbe } from './runtime/adapter.js';
export { createWebGpuBackend } from './runtime/createBackend.js';
export { gpuBufferOf } from './runtime/gpuBufferOf.js';
export type { GpuBufferRange } from './runtime/gpuBufferOf.js';
export type { WebGpuBackendOptions, WebGpuBatching } from './runtime/createBackend.js';
export type { WebGpuBackend, WrapOptions } from './runtime/wrap.js';
export type { WebGpuBackendStats } from './runtime/webGpuKernels.js';
export { roundToBf16, roundToF16 } from '@kvkit/contracts/backend';

/** Buffers and pipelines of a WebGPU backend; a steady-state call leaves `buffersCreated` unchanged. Another backend: KV044. */
export function webGpuBackendStats(backend: Backend): WebGpuBackendStats {
  return webGpuKernelsOf(backend, 'webGpuBackendStats').stats;
}
