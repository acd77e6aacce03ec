/**
 * Which objects are WebGPU backends and kernels, kept apart from the
 * backend's code so that the up-front entry (gpuBufferOf, webGpuBackendStats)
 * can answer for any argument without loading it.
 */
import type { Backend } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { describeBackend } from '@kvkit/contracts/backend';
import type { WebGpuKernels } from './webGpuKernels.js';

/** Backends by their public object: profiling hooks and stats reach the kernels through it. */
export const kernelsOf = new WeakMap<Backend, WebGpuKernels>();

/** Every WebGpuKernels made: the owner a WebGPU tensor names. */
export const allKernels = new WeakSet<object>();

/** The kernels behind a backend made by createWebGpuBackend(); KV044 for anything else. */
export function webGpuKernelsOf(backend: unknown, caller: string): WebGpuKernels {
  const kernels = typeof backend === 'object' && backend !== null ? kernelsOf.get(backend as Backend) : undefined;
  if (!kernels) throw new ContractError('KV044', caller, { arg: 'backend', expected: 'a backend made by createWebGpuBackend()', actual: describeBackend(backend) });
  return kernels;
}
