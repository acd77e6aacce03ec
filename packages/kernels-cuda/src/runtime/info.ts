import type { Backend } from '@kvkit/contracts';
import type { CudaDevice } from './driver.js';
import { cudaKernelsOf } from './registry.js';

/** What a CUDA backend runs on and with. */
export interface CudaBackendInfo {
  /** The device the backend runs on. */
  readonly device: CudaDevice;
  /** Its streaming multiprocessors: how many blocks the launch plans fill the GPU with. */
  readonly multiprocessors: number;
  /** The projection GEMM: cuBLASLt (and which library) or the package's own kernels, and why. */
  readonly gemm: { readonly engine: 'cublasLt'; readonly library: string } | { readonly engine: 'kvkit'; readonly reason: string };
  /** Device allocations made so far: tensors, workspaces, tables. A steady-state materializer call adds none. */
  readonly allocations: number;
  /** Device allocations held now; a loop whose outputs are disposed, or dropped and collected, holds it flat. */
  readonly liveAllocations: number;
  /** Whether ropePoolFused's kernel may start while its slot claims finish (Hopper's programmatic dependent launch), or why not. */
  readonly overlappedLaunch: { readonly enabled: true } | { readonly enabled: false; readonly reason: string };
}

/** What a CUDA backend runs on and with: its device, GEMM engine, allocations and launch overlap. Another backend: KV044. */
export function cudaBackendInfo(backend: Backend): CudaBackendInfo {
  const k = cudaKernelsOf(backend, 'cudaBackendInfo');
  return {
    device: k.device,
    multiprocessors: k.cx.multiprocessors,
    gemm: k.cublasLt ? { engine: 'cublasLt', library: k.cublasLt.library } : { engine: 'kvkit', reason: k.cublasLtAbsence ?? 'cuBLASLt not loaded' },
    allocations: k.cx.allocations,
    liveAllocations: k.cx.liveAllocations,
    overlappedLaunch: k.cx.overlap === true ? { enabled: true } : { enabled: false, reason: k.cx.overlap },
  };
}
