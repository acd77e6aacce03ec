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

export interface GemmTiming extends DeviceTiming {
  readonly tflops: number;
  readonly engine: string;
}

/** What the harness needs of a GPU backend's profiling hooks, the same for every backend. */
export interface Profiler {
  readonly impl: string;
  readonly backend: Backend;
  /** The arithmetic ceiling the GEMM row is a fraction of. */
  readonly gemmCeiling: string;
  /** `reps` samples of `callsPerSample` calls each, after `warmup` calls (3 when omitted). */
  time(enqueue: () => void, reps: number, warmup?: number): Promise<DeviceTiming>;
  /** Calls one sample of `time` spans: CUDA times a batch between two events, WebGPU each call (1 when omitted). */
  readonly callsPerSample?: number;
  /** Every copy ceiling (unit GB/s) and the arithmetic ceiling, measured now on random data. */
  ceilings(): Promise<Ceiling[]>;
  /**
   * The copy ceiling named `copy` on a problem of `bytes` moved (half read, half written), rotated over `copies`
   * buffer pairs as a row rotates its inputs; `reps` samples, as the row takes.
   */
  copyAt(copy: string, bytes: number, copies: number, reps: number): Promise<{ readonly gbs: number }>;
  /** The projection on the engine the materializer takes. */
  gemm(shape: GemmShape): Promise<GemmTiming>;
  /** The backend's own GEMM where another engine normally runs the projection (CUDA: the package's kernels, not cuBLASLt). */
  ownGemm?(shape: GemmShape): Promise<GemmTiming>;
  /**
   * The materializer's schedules other than its default (CUDA: `tuning.materializerSchedule`), and a way to run a
   * row's check and timing under one of them, the default back after: each is a variant of the materialize rows.
   */
  readonly materializerSchedules?: {
    others(): readonly string[];
    run<R>(schedule: string, body: () => Promise<R>): Promise<R>;
  };
}

const COPY_BYTES = 1 << 30;

/**
 * The CUDA materializer's schedules (kernels-cuda src/ops/tuning.ts) a run times beside its default, by the variant
 * name of their rows: the overlapped one with its norms on the whole device or on multiprocessors of their own.
 */
const CUDA_SCHEDULES: readonly (readonly [string, Readonly<Record<string, string | number>>])[] = [
  ['batched', { materializerSchedule: 'batched' }],
  ['overlapped', { materializerSchedule: 'overlapped', overlapNormMultiprocessors: 0 }],
  ['overlapped, norm on 4 SMs', { materializerSchedule: 'overlapped', overlapNormMultiprocessors: 4 }],
  ['overlapped, norm on 8 SMs', { materializerSchedule: 'overlapped', overlapNormMultiprocessors: 8 }],
];

/** Calls between the two events of a CUDA sample (timeOnDevice's default). */
const CUDA_BATCH = 10;

export async function cudaProfiler(): Promise<Profiler> {
  const { createCudaBackend } = await import('@kvkit/kernels-cuda');
  const p = await import('@kvkit/kernels-cuda/profiling');
  const backend = await createCudaBackend();
  return {
    impl: 'kvkit-cuda',
    backend,
    gemmCeiling: 'cublas-gemm',
    time: (enqueue, reps, warmup = 3) => p.timeOnDevice(backend, enqueue, { warmup, reps, batch: CUDA_BATCH }),
    callsPerSample: CUDA_BATCH,
    ceilings: async () => {
      const copies = await p.measureCopyCeilings(backend, COPY_BYTES);
      // The projection's own engine on a large square problem: the arithmetic ceiling materialize rows are read against.
      const big = await p.timeProjectionGemm(backend, { T: 8192, K: 8192, N: 8192, dtype: 'bf16' });
      const gemm: Ceiling = { name: big.engine === 'cublasLt' ? 'cublas-gemm' : 'kvkit-gemm', backend: 'cuda', unit: 'TFLOP/s', value: big.tflops, shape: { M: 8192, N: 8192, K: 8192 } };
      return [...copies.map((c): Ceiling => ({ name: c.name, backend: 'cuda', unit: 'GB/s', value: c.gbs })), gemm];
    },
    copyAt: (copy, bytes, copies, reps) => p.measureCopyAt(backend, { copy, bytes, copies, reps }),
    gemm: (shape) => p.timeProjectionGemm(backend, shape),
    ownGemm: (shape) => p.timeProjectionGemm(backend, shape, { engine: 'kvkit' }),
    materializerSchedules: {
      // Those that would change something: the default rows already run the one the tuning is at.
      others: () => CUDA_SCHEDULES.filter(([, settings]) => Object.entries(settings).some(([k, v]) => (p.tuning as Record<string, unknown>)[k] !== v)).map(([name]) => name),
      run: async (schedule, body) => {
        const settings = CUDA_SCHEDULES.find(([name]) => name === schedule)?.[1];
        if (!settings) throw new Error(`no CUDA materializer schedule named '${schedule}'`);
        const before = { ...p.tuning };
        // At any token count, so the row's small check against the CPU runs that schedule too.
        Object.assign(p.tuning, { ...settings, overlapMinTokens: 0 });
        try {
          return await body();
        } finally {
          Object.assign(p.tuning, before);
        }
      },
    },
  };
}

export async function webGpuProfiler(): Promise<Profiler> {
  const { createWebGpuBackend } = await import('@kvkit/kernels-wgsl');
  const p = await import('@kvkit/kernels-wgsl/profiling');
  const backend = await createWebGpuBackend({ powerPreference: 'high-performance' });
  return {
    impl: 'kvkit-webgpu',
    backend,
    gemmCeiling: 'webgpu-fma',
    time: (enqueue, reps, warmup = 3) => p.timeOnDevice(backend, enqueue, { warmup, reps }),
    callsPerSample: 1,
    ceilings: async () => {
      const copies = await p.measureCopyCeilings(backend, COPY_BYTES);
      const fma = await p.measureFmaCeiling(backend);
      return [
        ...copies.map((c): Ceiling => ({ name: c.name, backend: 'webgpu', unit: 'GB/s', value: c.gbs })),
        { name: 'webgpu-fma', backend: 'webgpu', unit: 'TFLOP/s', value: fma.tflops },
      ];
    },
    copyAt: (copy, bytes, copies, reps) => p.measureCopyAt(backend, { copy, bytes, copies, reps }),
    gemm: async (shape) => ({ ...(await p.timeProjectionGemm(backend, shape)), engine: 'kvkit-wgsl' }),
  };
}
