import type { Backend } from '@kvkit/contracts';
import type { Ceiling } from './results.js';

export interface DeviceTiming {
  readonly medianUs: number;
  readonly samplesUs: readonly number[];
  readonly method: string;
}

export interface GemmShape {
  readonly T: number;
  readonly K: number;
  readonly N: number;
  readonly dtype: 'bf16';
}

/** What the harness needs of a GPU backend's profiling hooks, the same for every backend. */
export interface Profiler {
  readonly impl: string;
  readonly backend: Backend;
  /** The bandwidth ceiling memory-bound rows are a fraction of. */
  readonly copyCeiling: string;
  /** The arithmetic ceiling the GEMM row is a fraction of. */
  readonly gemmCeiling: string;
  time(enqueue: () => void, reps: number): Promise<DeviceTiming>;
  ceilings(): Promise<Ceiling[]>;
  gemm(shape: GemmShape): Promise<DeviceTiming & { tflops: number; engine: string }>;
}

const COPY_BYTES = 1 << 30;

export async function cudaProfiler(): Promise<Profiler> {
  const { createCudaBackend } = await import('@kvkit/kernels-cuda');
  const p = await import('@kvkit/kernels-cuda/profiling');
  const backend = await createCudaBackend();
  let gemmRate: Ceiling | undefined;
  return {
    impl: 'kvkit-cuda',
    backend,
    copyCeiling: 'cuda-copy',
    gemmCeiling: 'cublas-gemm',
    time: (enqueue, reps) => p.timeOnDevice(backend, enqueue, { warmup: 3, reps }),
    ceilings: async () => {
      const copy = await p.measureCopyCeiling(backend, COPY_BYTES);
      // The projection's own engine on a large square problem: the arithmetic ceiling materialize rows are read against.
      const big = await p.timeProjectionGemm(backend, { T: 8192, K: 8192, N: 8192, dtype: 'bf16' });
      gemmRate = { name: big.engine === 'cublasLt' ? 'cublas-gemm' : 'kvkit-gemm', backend: 'cuda', unit: 'TFLOP/s', value: big.tflops, shape: { M: 8192, N: 8192, K: 8192 } };
      return [{ name: 'cuda-copy', backend: 'cuda', unit: 'GB/s', value: copy.gbs }, gemmRate];
    },
    gemm: (shape) => p.timeProjectionGemm(backend, shape),
  };
}

export async function webGpuProfiler(): Promise<Profiler> {
  const { createWebGpuBackend } = await import('@kvkit/kernels-wgsl');
  const p = await import('@kvkit/kernels-wgsl/profiling');
  const backend = await createWebGpuBackend({ powerPreference: 'high-performance' });
  return {
    impl: 'kvkit-webgpu',
    backend,
    copyCeiling: 'webgpu-copy',
    gemmCeiling: 'webgpu-fma',
    time: (enqueue, reps) => p.timeOnDevice(backend, enqueue, { warmup: 3, reps }),
    ceilings: async () => {
      const copy = await p.measureCopyCeiling(backend, COPY_BYTES);
      const fma = await p.measureFmaCeiling(backend);
      return [
        { name: 'webgpu-copy', backend: 'webgpu', unit: 'GB/s', value: copy.gbs },
        { name: 'webgpu-fma', backend: 'webgpu', unit: 'TFLOP/s', value: fma.tflops },
      ];
    },
    gemm: async (shape) => ({ ...(await p.timeProjectionGemm(backend, shape)), engine: 'kvkit-wgsl' }),
  };
}
