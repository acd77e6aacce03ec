/**
 * Device-time measurement for the benchmark harness: CUDA events around a
 * batch of calls that the host enqueues while a spin kernel holds the stream,
 * so the figure is the GPU's time per call, not koffi's launch rate.
 */
import type { Backend, FloatDType } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { LAUNCHES } from './generated/kernels.js';
import { Projection } from './ops/projection.js';
import type { GemmEngine } from './ops/projection.js';
import { ELEMENT_BYTES } from './runtime/cudaTensor.js';
import type { CudaKernels } from './runtime/cudaKernels.js';
import type { DeviceBuffer } from './runtime/memory.js';
import { cudaKernelsOf } from './runtime/registry.js';

/** The materializer's schedule choices (ops/tuning.ts): a benchmark may change them between calls, to time each. */
export { MATERIALIZER_SCHEDULES, tuning } from './ops/tuning.js';
export type { MaterializerSchedule } from './ops/tuning.js';
/** pagedAttention's split rules (ops/pagedAttention.ts), likewise open to a benchmark. */
export { pagedTuning } from './ops/pagedAttention.js';

/** Device time per call of what an `enqueue` callback enqueued: the median and every sample, timed with CUDA events. */
export interface DeviceTiming {
  /** The median sample, in microseconds. */
  readonly medianUs: number;
  /** Every sample, in microseconds per call. */
  readonly samplesUs: readonly number[];
  /** Always 'cuda-events': events recorded on the backend's stream around the calls. */
  readonly method: 'cuda-events';
}

/** Host time per enqueued call is multiplied by this (plus a margin) to size the spin that holds the stream. */
const SPIN_HEADROOM = 3;
const SPIN_MARGIN_NS = 50_000;

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/**
 * Device time per call of what `enqueue` enqueues on this backend's stream:
 * `warmup` calls, then `reps` samples, each `batch` calls between two events
 * behind a spin kernel; sample = elapsed / batch.
 */
export async function timeOnDevice(backend: Backend, enqueue: () => void, opts: { warmup?: number; reps?: number; batch?: number } = {}): Promise<DeviceTiming> {
  const k = cudaKernelsOf(backend, 'timeOnDevice');
  const warmup = opts.warmup ?? 3;
  const reps = opts.reps ?? 20;
  const batch = Math.max(1, opts.batch ?? 10);
  // `enqueue` may launch on the stream directly: after each await, another backend's context may be current.
  k.cx.makeCurrent();
  for (let i = 0; i < warmup; i++) enqueue();
  await backend.sync();
  // How long the host takes to enqueue one batch: the spin must outlast it.
  k.cx.makeCurrent();
  const started = performance.now();
  for (let i = 0; i < batch; i++) enqueue();
  const hostNs = (performance.now() - started) * 1e6;
  await backend.sync();
  const spinNs = Math.ceil(hostNs * SPIN_HEADROOM + SPIN_MARGIN_NS);
  const op = 'timeOnDevice';
  const cx = k.cx;
  const pairs: [bigint, bigint][] = [];
  for (let r = 0; r < reps; r++) {
    cx.makeCurrent();
    k.params.spin.write({ nanoseconds: spinNs });
    cx.launch('spin_stream', k.params.spin, 1, 1, LAUNCHES.spin.default.threads, 0, op);
    const start = cx.record(op, true);
    for (let i = 0; i < batch; i++) enqueue();
    pairs.push([start, cx.record(op, true)]);
  }
  await backend.sync();
  const samplesUs = pairs.map(([start, end]) => {
    const us = (cx.elapsedMs(start, end, op) * 1000) / batch;
    cx.recycle(start, true);
    cx.recycle(end, true);
    return us;
  });
  return { medianUs: median(samplesUs), samplesUs, method: 'cuda-events' };
}

/** Fills device memory with uniform values in [-scale, scale). */
function fillRandom(k: CudaKernels, ptr: number, count: number, dtype: FloatDType, seed: number, scale: number, op: string): void {
  if (count === 0) return;
  k.params.fill.write({ data: ptr, count, seed, scale });
  const { threads } = LAUNCHES.fill.default;
  k.cx.launch(`fill_random_${dtype}`, k.params.fill, Math.min(Math.ceil(count / threads), k.cx.multiprocessors * 16), 1, threads, 0, op);
}

/** One way of copying device memory, timed: GB/s counts bytes read + written. */
export interface CopyCeiling {
  /** `cuda-copy-grid-stride`, `cuda-copy-unrolled` or `cuMemcpyDtoDAsync`. */
  readonly name: string;
  /** GB/s: bytes read plus bytes written, per second of device time. */
  readonly gbs: number;
  /** The device time it was computed from. */
  readonly timing: DeviceTiming;
}

/** A copy of `vectors` 16-byte vectors from `src` to `dst`, enqueued on the backend's stream. */
type CopyLaunch = (src: number, dst: number, vectors: number) => void;

/** The copies the ceilings are measured with, by name, in the order they are reported. */
function copyLaunchers(k: CudaKernels, op: string): [string, CopyLaunch][] {
  const { default: gridStride, unrolled } = LAUNCHES.copy;
  const kernel = (entry: 'copy_vectors' | 'copy_vectors_unrolled', grid: (vectors: number) => number, threads: number): CopyLaunch => (src, dst, vectors) => {
    k.params.copy.write({ src, dst, vectors });
    k.cx.launch(entry, k.params.copy, grid(vectors), 1, threads, 0, op);
  };
  return [
    ['cuda-copy-grid-stride', kernel('copy_vectors', (v) => Math.min(Math.ceil(v / gridStride.threads), k.cx.multiprocessors * 8), gridStride.threads)],
    ['cuda-copy-unrolled', kernel('copy_vectors_unrolled', (v) => Math.ceil(v / (unrolled.threads * unrolled.vectorsPerThread)), unrolled.threads)],
    ['cuMemcpyDtoDAsync', (src, dst, vectors) => k.cx.copy(dst, src, vectors * 16, op)],
  ];
}

/**
 * The bandwidth ceilings of the same run: `bytes` of random data copied by
 * the package's grid-stride kernel, by its unrolled one-pass kernel, and by
 * the driver's `cuMemcpyDtoDAsync`. Memory-bound figures are read against the
 * best of them, so no ratio is flattered by a weak copy.
 */
export async function measureCopyCeilings(backend: Backend, bytes: number): Promise<CopyCeiling[]> {
  const k = cudaKernelsOf(backend, 'measureCopyCeilings');
  const op = 'measureCopyCeilings';
  const vectors = Math.max(1, Math.floor(bytes / 16));
  k.cx.makeCurrent();
  const src = k.cx.alloc(vectors * 16, op);
  const dst = k.cx.alloc(vectors * 16, op);
  try {
    fillRandom(k, src.ptr, vectors * 4, 'f32', 1, 1, op);
    const out: CopyCeiling[] = [];
    for (const [name, launch] of copyLaunchers(k, op)) {
      const timing = await timeOnDevice(backend, () => launch(src.ptr, dst.ptr, vectors), { batch: 5 });
      out.push({ name, gbs: (2 * vectors * 16) / (timing.medianUs * 1e3), timing });
    }
    return out;
  } finally {
    src.release();
    dst.release();
  }
}

/**
 * One copy of the ceilings (`copy`, a name `measureCopyCeilings` reports) on
 * a problem of `bytes` moved, half read and half written, rotated through
 * `copies` pairs of random source and destination buffers as a benchmark
 * rotates an op's inputs, so a small one is not served from L2: what an op
 * that moves those bytes could reach at best.
 */
export async function measureCopyAt(backend: Backend, opts: { copy: string; bytes: number; copies?: number; reps?: number }): Promise<CopyCeiling> {
  const k = cudaKernelsOf(backend, 'measureCopyAt');
  const op = 'measureCopyAt';
  const launchers = copyLaunchers(k, op);
  const launch = launchers.find(([name]) => name === opts.copy)?.[1];
  if (!launch) throw new ContractError('KV009', op, { arg: 'copy', expected: launchers.map(([name]) => `'${name}'`).join(', '), actual: `'${opts.copy}'` });
  const vectors = Math.max(1, Math.floor(opts.bytes / 32));
  const copies = Math.max(1, opts.copies ?? 1);
  k.cx.makeCurrent();
  const pairs: { src: DeviceBuffer; dst: DeviceBuffer }[] = [];
  try {
    for (let i = 0; i < copies; i++) {
      pairs.push({ src: k.cx.alloc(vectors * 16, op), dst: k.cx.alloc(vectors * 16, op) });
      fillRandom(k, pairs[i]!.src.ptr, vectors * 4, 'f32', 1 + i, 1, op);
    }
    let next = 0;
    const timing = await timeOnDevice(
      backend,
      () => {
        const { src, dst } = pairs[next++ % copies]!;
        launch(src.ptr, dst.ptr, vectors);
      },
      { reps: opts.reps ?? 20 },
    );
    return { name: opts.copy, gbs: (2 * vectors * 16) / (timing.medianUs * 1e3), timing };
  } finally {
    for (const { src, dst } of pairs) {
      src.release();
      dst.release();
    }
  }
}

/**
 * The projection GEMM alone, C[T, N] = A[T, K] · W[N, K]^T on random data: cuBLASLt if loaded, else (or with
 * `engine: 'kvkit'`) the package's own kernels.
 */
export async function timeProjectionGemm(
  backend: Backend,
  shape: { T: number; K: number; N: number; dtype: FloatDType },
  opts: { engine?: GemmEngine } = {},
): Promise<DeviceTiming & { tflops: number; engine: GemmEngine }> {
  const k = cudaKernelsOf(backend, 'timeProjectionGemm');
  const op = 'timeProjectionGemm';
  const { T, K, N, dtype } = shape;
  const es = ELEMENT_BYTES[dtype];
  k.cx.makeCurrent();
  const a = k.cx.alloc(T * K * es, op);
  const w = k.cx.alloc(N * K * es, op);
  const c = k.cx.alloc(T * N * es, op);
  const projection = new Projection(k, dtype, N, K, 1, opts.engine);
  try {
    fillRandom(k, a.ptr, T * K, dtype, 2, 1, op);
    fillRandom(k, w.ptr, N * K, dtype, 3, 1 / Math.sqrt(K), op);
    const engine = projection.engineFor(T, op);
    const timing = await timeOnDevice(backend, () => projection.run(a.ptr, w.ptr, c.ptr, T, op), { batch: 3 });
    return { ...timing, tflops: (2 * T * K * N) / (timing.medianUs * 1e6), engine };
  } finally {
    projection.dispose();
    for (const b of [a, w, c]) b.release();
  }
}
