import type { Backend } from '@kvkit/contracts';
import { isContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend } from '@kvkit/kernels-cuda';
import { createWebGpuBackend, probeWebGpu } from '@kvkit/kernels-wgsl';

export interface BackendReport {
  readonly kind: 'cuda' | 'webgpu' | 'cpu';
  /** What was found on this machine, or why the backend could not start. */
  readonly found: string;
  readonly started: boolean;
}

/** Why a backend did not start: its coded message, first sentence only. */
function why(e: unknown): string {
  if (isContractError(e)) return `${e.code}: ${e.message.replace(/^\[KV\d{3}\] \w+: /, '').split('. ')[0]}`;
  return e instanceof Error ? e.message : String(e);
}

/**
 * Starts the best backend found, best first: CUDA, then WebGPU (a GPU, or
 * SwiftShader where there is none), then the CPU reference. Each that does
 * not start says why, with its code.
 */
export async function chooseBackend(): Promise<{ backend: Backend; reports: BackendReport[] }> {
  const reports: BackendReport[] = [];
  try {
    const backend = await createCudaBackend();
    reports.push({ kind: 'cuda', found: backend.label, started: true });
    return { backend, reports };
  } catch (e) {
    reports.push({ kind: 'cuda', found: why(e), started: false });
  }
  const probe = await probeWebGpu({ powerPreference: 'high-performance' });
  try {
    const backend = await createWebGpuBackend({ powerPreference: 'high-performance' });
    reports.push({ kind: 'webgpu', found: probe.ok ? `${probe.description}${probe.software ? ' (software, SwiftShader)' : ''}` : backend.label, started: true });
    return { backend, reports };
  } catch (e) {
    reports.push({ kind: 'webgpu', found: why(e), started: false });
  }
  const backend = createCpuBackend();
  reports.push({ kind: 'cpu', found: 'reference backend, f64 accumulation', started: true });
  return { backend, reports };
}
