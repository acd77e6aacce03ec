import type { GpuLimits } from '../src/ops/rowTiles.js';

/** A GPU the backend runs on, by what its launches must fit in. */
export interface SupportedGpu extends GpuLimits {
  readonly arch: string;
  readonly part: string;
  readonly maxThreadsPerMultiprocessor: number;
}

const KiB = 1024;

/**
 * Every compute capability the fatbin runs on, sm_80 on (its sm_80 code on
 * every 8.x, its compute_90 PTX on 9.0 and newer), with a large part's
 * multiprocessors; limits as the CUDA C++ Programming Guide tabulates them.
 * The row kernels do not opt in past 48 KiB of shared memory a block.
 */
export const SUPPORTED_GPUS: readonly SupportedGpu[] = [
  { arch: 'sm_80', part: 'A100', multiprocessors: 108, sharedBytesPerMultiprocessor: 164 * KiB, maxThreadsPerMultiprocessor: 2048 },
  { arch: 'sm_86', part: 'RTX 3090', multiprocessors: 82, sharedBytesPerMultiprocessor: 100 * KiB, maxThreadsPerMultiprocessor: 1536 },
  { arch: 'sm_89', part: 'L40S', multiprocessors: 142, sharedBytesPerMultiprocessor: 100 * KiB, maxThreadsPerMultiprocessor: 1536 },
  { arch: 'sm_90', part: 'H200', multiprocessors: 132, sharedBytesPerMultiprocessor: 228 * KiB, maxThreadsPerMultiprocessor: 2048 },
  { arch: 'sm_100', part: 'B200', multiprocessors: 148, sharedBytesPerMultiprocessor: 228 * KiB, maxThreadsPerMultiprocessor: 2048 },
  { arch: 'sm_120', part: 'RTX 5090', multiprocessors: 170, sharedBytesPerMultiprocessor: 100 * KiB, maxThreadsPerMultiprocessor: 1536 },
].map((g) => ({ ...g, sharedBytesPerBlock: 48 * KiB, reservedSharedBytesPerBlock: 1 * KiB }));

export function gpuOf(arch: string): SupportedGpu {
  const gpu = SUPPORTED_GPUS.find((g) => g.arch === arch);
  if (!gpu) throw new Error(`no supported GPU ${arch}`);
  return gpu;
}

/** The GPU the package's tuning was measured on. */
export const H200 = gpuOf('sm_90');
