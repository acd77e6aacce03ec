import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { probeCuda } from '@kvkit/kernels-cuda';
import { probeWebGpu } from '@kvkit/kernels-wgsl';

export interface BackendReport {
  readonly kind: 'cuda' | 'webgpu' | 'cpu';
  /** What was found on this machine. */
  readonly found: string;
  /** Whether this release runs kvkit's ops there. */
  readonly runsOps: boolean;
}

/**
 * Looks for every backend, best first (CUDA, WebGPU, then the CPU
 * reference), and picks the best one whose package runs the ops.
 */
export async function chooseBackend(): Promise<{ backend: Backend; reports: BackendReport[] }> {
  const cuda = probeCuda();
  const gpu = await probeWebGpu();
  const reports: BackendReport[] = [
    {
      kind: 'cuda',
      found: cuda.ok ? cuda.devices.map((d) => `${d.name} (sm_${d.computeCapability.replace('.', '')})`).join(', ') : cuda.reason,
      runsOps: false,
    },
    {
      kind: 'webgpu',
      found: gpu.ok ? `${gpu.description}${gpu.software ? ' (software)' : ''}` : gpu.reason,
      runsOps: false,
    },
    { kind: 'cpu', found: 'reference backend, f64 accumulation', runsOps: true },
  ];
  return { backend: createCpuBackend(), reports };
}
