import type { Backend } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { describeBackend } from '@kvkit/contracts/backend';
import type { CudaKernels } from './cudaKernels.js';

const kernelsOf = new WeakMap<Backend, CudaKernels>();

export function register(backend: Backend, kernels: CudaKernels): void {
  kernelsOf.set(backend, kernels);
}

/** The kernels behind a backend made by createCudaBackend(), or undefined. */
export function findCudaKernels(backend: unknown): CudaKernels | undefined {
  return typeof backend === 'object' && backend !== null ? kernelsOf.get(backend as Backend) : undefined;
}

/** The kernels behind a backend made by createCudaBackend(); KV044 for anything else. */
export function cudaKernelsOf(backend: unknown, caller: string): CudaKernels {
  const kernels = findCudaKernels(backend);
  if (!kernels) throw new ContractError('KV044', caller, { arg: 'backend', expected: 'a backend made by createCudaBackend()', actual: describeBackend(backend) });
  return kernels;
}
