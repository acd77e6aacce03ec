import type { Backend } from '@kvkit/contracts';
import type { CudaKernels } from './cudaKernels.js';

const kernelsOf = new WeakMap<Backend, CudaKernels>();

export function register(backend: Backend, kernels: CudaKernels): void {
  kernelsOf.set(backend, kernels);
}

/** The kernels behind a backend made by createCudaBackend(), or undefined. */
export function findCudaKernels(backend: unknown): CudaKernels | undefined {
  return typeof backend === 'object' && backend !== null ? kernelsOf.get(backend as Backend) : undefined;
}

/** The kernels behind a backend made by createCudaBackend(); a TypeError for anything else. */
export function cudaKernelsOf(backend: Backend, caller: string): CudaKernels {
  const kernels = kernelsOf.get(backend);
  if (!kernels) throw new TypeError(`${caller} takes a backend made by createCudaBackend(); got ${backend?.label ?? String(backend)}`);
  return kernels;
}
