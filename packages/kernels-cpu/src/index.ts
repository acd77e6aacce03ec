import { defineBackend, describeBackend } from '@kvkit/contracts/backend';
import { ContractError } from '@kvkit/contracts';
import type { Backend } from '@kvkit/contracts';
import { CpuKernels } from './runtime/cpuKernels.js';
import type { CpuBackendStats } from './runtime/cpuKernels.js';

export type { CpuBackendStats } from './runtime/cpuKernels.js';
export { roundToBf16, roundToF16 } from '@kvkit/contracts/backend';

const kernelsOf = new WeakMap<Backend, CpuKernels>();

/** The reference backend: every op in f64, outputs rounded once (ties to even) to their dtype. */
export function createCpuBackend(): Backend {
  const kernels = new CpuKernels();
  const backend = defineBackend(kernels);
  kernelsOf.set(backend, kernels);
  return backend;
}

/** Buffers a CPU backend has allocated so far; a steady-state call leaves the counts unchanged. Another backend: KV044. */
export function cpuBackendStats(backend: Backend): CpuBackendStats {
  const kernels = kernelsOf.get(backend);
  if (!kernels) throw new ContractError('KV044', 'cpuBackendStats', { arg: 'backend', expected: 'a backend made by createCpuBackend()', actual: describeBackend(backend) });
  return kernels.stats;
}
