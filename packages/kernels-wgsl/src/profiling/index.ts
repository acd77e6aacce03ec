/**
 * Profiling hooks for the benchmark harness (`@kvkit/kernels-wgsl/profiling`):
 * device time of whatever an `enqueue` callback records on a WebGPU backend,
 * and the ceilings (copy bandwidth, FMA throughput) and the projection GEMM
 * measured on the same device in the same run.
 */
import type { Backend, FloatDType } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { decodeBf16, decodeF16, encodeHalves } from '@kvkit/contracts/backend';
import { launchGemm } from '../ops/launch.js';
import { webGpuKernelsOf } from '../runtime/registry.js';
import type { DeviceStorage } from '../runtime/gpuRuntime.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { copyShader, fmaFlopsPerInvocation, fmaShader } from '../shaders/ceilings.wgsl.js';
import { planCopy, planFma } from '../shaders/plan.js';

/** The kernel-shape defaults (shaders/plan.ts): a benchmark may change them before it builds its workloads, to compare variants. */
export { tuning } from '../shaders/plan.js';

/** Device time per call of what an `enqueue` callback enqueued: the median and every sample, and how it was measured. */
export interface DeviceTiming {
  /** The median sample, in microseconds. */
  readonly medianUs: number;
  /** Every sample, in microseconds per call. */
  readonly samplesUs: readonly number[];
  /** 'timestamp-query' where the device has timestamps, else 'wall-clock' over many calls per submit. */
  readonly method: 'timestamp-query' | 'wall-clock';
}

/** The query set holds at most this many timestamps (the WebGPU limit). */
const MAX_QUERIES = 4096;
/** A wall-clock sample runs the callback until at least this long has passed. */
const WALL_CLOCK_SAMPLE_US = 2000;

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/**
 * Device time of what `enqueue` enqueues on this backend, per call: warm-up,
 * then `reps` samples. With `timestamp-query`, each sample spans the first
 * pass the call begins to the end of its last (the calls run back to back in
 * one batch); otherwise many calls per submit, timed by wall clock.
 */
export async function timeOnDevice(backend: Backend, enqueue: () => void, opts: { warmup?: number; reps?: number } = {}): Promise<DeviceTiming> {
  const k = webGpuKernelsOf(backend, 'timeOnDevice');
  const warmup = opts.warmup ?? 3;
  const reps = Math.max(1, opts.reps ?? 20);
  for (let i = 0; i < warmup; i++) enqueue();
  await backend.sync();
  if (k.runtime.timestamps) {
    const timed = await timeWithTimestamps(k, enqueue, reps);
    await backend.sync();
    if (timed) return timed;
  }
  return timeByWallClock(k, enqueue, reps);
}

async function timeWithTimestamps(k: WebGpuKernels, enqueue: () => void, reps: number): Promise<DeviceTiming | undefined> {
  const runtime = k.runtime;
  const count = Math.min(MAX_QUERIES, Math.max(2, 8 * reps));
  const querySet = runtime.device.createQuerySet({ type: 'timestamp', count });
  let next = 0;
  let overflow = false;
  const windows: [number, number][] = [];
  runtime.flush();
  runtime.timer = {
    next: () => {
      if (next + 2 > count) {
        overflow = true;
        return undefined;
      }
      const writes = { querySet, beginningOfPassWriteIndex: next, endOfPassWriteIndex: next + 1 };
      next += 2;
      return writes;
    },
  };
  try {
    // Batched explicitly: calls on the application's buffers would otherwise submit one by one.
    runtime.batched(() => {
      for (let r = 0; r < reps; r++) {
        const first = next;
        enqueue();
        runtime.endPass();
        windows.push([first, next]);
      }
    });
  } finally {
    runtime.timer = undefined;
  }
  if (overflow || next === 0 || windows.some(([a, b]) => b <= a)) {
    querySet.destroy();
    return undefined;
  }
  const resolved = runtime.device.createBuffer({ size: next * 8, usage: 0x0200 | 0x0004 }); // QUERY_RESOLVE | COPY_SRC
  runtime.encoderForQueries().resolveQuerySet(querySet, 0, next, resolved, 0);
  try {
    const stamps = new BigUint64Array(await runtime.readBytes('timeOnDevice', resolved, 0, next * 8));
    const samplesUs = windows.map(([a, b]) => Number(stamps[b - 1]! - stamps[a]!) / 1000);
    if (samplesUs.some((s) => !(s > 0))) return undefined;
    return { medianUs: median(samplesUs), samplesUs, method: 'timestamp-query' };
  } finally {
    runtime.destroyLater(resolved);
    querySet.destroy();
  }
}

async function timeByWallClock(k: WebGpuKernels, enqueue: () => void, reps: number): Promise<DeviceTiming> {
  const runtime = k.runtime;
  const batch = async (calls: number) => {
    await runtime.idle('timeOnDevice');
    const start = performance.now();
    runtime.batched(() => {
      for (let i = 0; i < calls; i++) enqueue();
    });
    await runtime.idle('timeOnDevice');
    return (performance.now() - start) * 1000;
  };
  let calls = 1;
  for (;;) {
    const us = await batch(calls);
    if (us >= WALL_CLOCK_SAMPLE_US || calls >= 4096) break;
    calls *= 4;
  }
  const samplesUs: number[] = [];
  for (let r = 0; r < reps; r++) samplesUs.push((await batch(calls)) / calls);
  return { medianUs: median(samplesUs), samplesUs, method: 'wall-clock' };
}

/** One shape of the WGSL copy, timed: GB/s counts bytes read + written. */
export interface CopyCeiling {
  /** `webgpu-copy-x1`, `-x2`, `-x4`: vec4<u32> copied per invocation. */
  readonly name: string;
  /** GB/s: bytes read plus bytes written, per second of device time. */
  readonly gbs: number;
  /** The device time it was computed from. */
  readonly timing: DeviceTiming;
}

/** Random words written over `storage` a chunk at a time, so a ceiling never reads zero pages. */
function fillRandomWords(k: WebGpuKernels, storage: DeviceStorage, size: number): void {
  const chunk = new Uint32Array(Math.min(size, 16 << 20) / 4);
  let x = 0x2545f491;
  for (let i = 0; i < chunk.length; i++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    chunk[i] = x >>> 0;
  }
  for (let at = 0; at < size; at += chunk.byteLength) {
    const bytes = Math.min(chunk.byteLength, size - at);
    k.runtime.device.queue.writeBuffer(storage.buffer, at, chunk, 0, bytes / 4);
  }
}

/** The copies the ceilings are measured with: vec4<u32> copied, 1, 2 or 4 per invocation. */
const COPY_WIDTHS = [1, 2, 4] as const;
const copyName = (perInvocation: number) => `webgpu-copy-x${perInvocation}`;

/** A dispatch of the WGSL copy with `perInvocation` vectors per invocation: `size` bytes (a multiple of 16) from `src` to `dst`. */
function copyDispatch(k: WebGpuKernels, perInvocation: number): (src: DeviceStorage, dst: DeviceStorage, size: number) => void {
  const plan = planCopy(k.runtime.caps, perInvocation);
  const kernel = k.runtime.kernel(plan, () => copyShader(plan));
  return (src, dst, size) => {
    const vectors = size / 16;
    const invocations = Math.ceil(vectors / perInvocation);
    k.runtime.dispatch(kernel, { src: src.range(0, size), dst: dst.range(0, size) }, { vectors, invocations }, Math.ceil(invocations / plan.workgroupSize));
  };
}

/**
 * The bandwidth ceilings of the same run: a vec4<u32> copy of `bytes` of
 * random data (capped at the device's largest binding), with 1, 2 or 4
 * vectors per invocation. Memory-bound figures are read against the best.
 */
export async function measureCopyCeilings(backend: Backend, bytes: number): Promise<CopyCeiling[]> {
  const k = webGpuKernelsOf(backend, 'measureCopyCeilings');
  let size = Math.max(16, Math.floor(Math.min(bytes, k.runtime.maxBufferBytes) / 16) * 16);
  let src: DeviceStorage;
  let dst: DeviceStorage;
  // A device may list a binding size it cannot back with memory (SwiftShader): halve until both buffers fit.
  for (;;) {
    k.runtime.device.pushErrorScope('out-of-memory');
    src = k.storage(size, 'kvkit copy ceiling source', 'measureCopyCeilings');
    dst = k.storage(size, 'kvkit copy ceiling destination', 'measureCopyCeilings');
    const error = await k.runtime.device.popErrorScope();
    if (!error || size <= 1 << 20) break;
    src.release();
    dst.release();
    size = Math.floor(size / 32) * 16;
  }
  try {
    fillRandomWords(k, src, size);
    const out: CopyCeiling[] = [];
    for (const perInvocation of COPY_WIDTHS) {
      const copy = copyDispatch(k, perInvocation);
      const timing = await timeOnDevice(backend, () => copy(src, dst, size), { warmup: 3, reps: 20 });
      out.push({ name: copyName(perInvocation), gbs: (2 * size) / (timing.medianUs * 1e3), timing });
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
 * that moves those bytes could reach at best. A half past the device's
 * largest binding is KV045, as a tensor of that size would be.
 */
export async function measureCopyAt(backend: Backend, opts: { copy: string; bytes: number; copies?: number; reps?: number }): Promise<CopyCeiling> {
  const op = 'measureCopyAt';
  const k = webGpuKernelsOf(backend, op);
  const perInvocation = COPY_WIDTHS.find((n) => copyName(n) === opts.copy);
  if (perInvocation === undefined) throw new ContractError('KV009', op, { arg: 'copy', expected: COPY_WIDTHS.map((n) => `'${copyName(n)}'`).join(', '), actual: `'${opts.copy}'` });
  const size = Math.max(16, Math.floor(opts.bytes / 32) * 16);
  const copies = Math.max(1, opts.copies ?? 1);
  const pairs: { src: DeviceStorage; dst: DeviceStorage }[] = [];
  try {
    for (let i = 0; i < copies; i++) {
      const src = k.storage(size, 'kvkit sized copy source', op);
      pairs.push({ src, dst: k.storage(size, 'kvkit sized copy destination', op) });
      fillRandomWords(k, src, size);
    }
    const copy = copyDispatch(k, perInvocation);
    let next = 0;
    const timing = await timeOnDevice(
      backend,
      () => {
        const { src, dst } = pairs[next++ % copies]!;
        copy(src, dst, size);
      },
      { warmup: 3, reps: opts.reps ?? 20 },
    );
    return { name: opts.copy, gbs: (2 * size) / (timing.medianUs * 1e3), timing };
  } finally {
    for (const { src, dst } of pairs) {
      src.release();
      dst.release();
    }
  }
}

/** Ceiling: f32 FMA throughput (8 independent vec4 chains per invocation, 1024 steps). */
export async function measureFmaCeiling(backend: Backend): Promise<{ tflops: number; timing: DeviceTiming }> {
  const k = webGpuKernelsOf(backend, 'measureFmaCeiling');
  // Enough invocations to fill a large GPU; a software adapter gets a token load.
  const invocations = k.software ? 1 << 12 : 1 << 22;
  const out = k.storage(invocations * 4, 'kvkit fma ceiling output', 'measureFmaCeiling');
  try {
    const plan = planFma(k.runtime.caps);
    const kernel = k.runtime.kernel(plan, () => fmaShader(plan));
    const enqueue = () => k.runtime.dispatch(kernel, { out: out.range(0, invocations * 4) }, { invocations, seed: 7 }, Math.ceil(invocations / plan.workgroupSize));
    const timing = await timeOnDevice(backend, enqueue, { warmup: 2, reps: 10 });
    return { tflops: (invocations * fmaFlopsPerInvocation(plan)) / (timing.medianUs * 1e6), timing };
  } finally {
    out.release();
  }
}

/** Random words of `count` elements of `dtype` with values in ±[0.5, 2): f32 bits, or packed halves. */
function randomWords(dtype: FloatDType, count: number, seed: number): Uint32Array {
  const f32Words = new Uint32Array(count);
  let x = seed >>> 0 || 1;
  const nextF32Bits = () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    // sign, exponent 126 or 127, random fraction
    return ((x & 0x80000000) | ((126 + ((x >>> 30) & 1)) << 23) | (x & 0x7fffff)) >>> 0;
  };
  for (let i = 0; i < count; i++) f32Words[i] = nextF32Bits();
  if (dtype === 'f32') return f32Words;
  const words = new Uint32Array(Math.ceil(count / 2));
  encodeHalves(dtype, new Float32Array(f32Words.buffer), new Uint16Array(words.buffer, 0, count));
  return words;
}

function valueAt(dtype: FloatDType, words: Uint32Array, i: number): number {
  if (dtype === 'f32') return new Float32Array(words.buffer, i * 4, 1)[0]!;
  const half = (words[i >> 1]! >>> ((i & 1) * 16)) & 0xffff;
  return dtype === 'f16' ? decodeF16(half) : decodeBf16(half);
}

/**
 * The materializer's projection GEMM alone, C[T, N] = A[T, K] · W[N, K]^T in
 * `dtype`, on random data; a sample of outputs is checked against an f64 dot
 * product before timing.
 */
export async function timeProjectionGemm(
  backend: Backend,
  shape: { T: number; K: number; N: number; dtype: FloatDType },
): Promise<DeviceTiming & { tflops: number }> {
  const k = webGpuKernelsOf(backend, 'timeProjectionGemm');
  const { T, K, N, dtype } = shape;
  const bytes = dtype === 'f32' ? 4 : 2;
  const aWords = randomWords(dtype, T * K, 11);
  const wWords = randomWords(dtype, N * K, 23);
  const a = k.storage(T * K * bytes, 'kvkit gemm A', 'timeProjectionGemm', undefined, true);
  const w = k.storage(N * K * bytes, 'kvkit gemm W', 'timeProjectionGemm', undefined, true);
  const c = k.storage(T * N * bytes, 'kvkit gemm C', 'timeProjectionGemm');
  try {
    for (const [s, data] of [
      [a, aWords],
      [w, wWords],
    ] as const) {
      new Uint32Array(s.buffer.getMappedRange()).set(data);
      s.buffer.unmap();
    }
    const ranges = { a: a.range(0, T * K * bytes), w: w.range(0, N * K * bytes), c: c.range(0, T * N * bytes) };
    const enqueue = () => launchGemm(k, dtype, ranges, { M: T, N, K });
    enqueue();
    const out = new Uint32Array(await k.runtime.readBytes('timeProjectionGemm', c.buffer, 0, Math.ceil((T * N * bytes) / 4) * 4));
    checkSample(dtype, { aWords, wWords, out }, { T, K, N });
    const timing = await timeOnDevice(backend, enqueue, { warmup: 2, reps: 10 });
    return { ...timing, tflops: (2 * T * N * K) / (timing.medianUs * 1e6) };
  } finally {
    a.release();
    w.release();
    c.release();
  }
}

function checkSample(dtype: FloatDType, data: { aWords: Uint32Array; wWords: Uint32Array; out: Uint32Array }, shape: { T: number; K: number; N: number }): void {
  const { T, K, N } = shape;
  // Rounding to the dtype and f32 accumulation over K terms of magnitude up to 4.
  const tolerance = (dtype === 'bf16' ? 2 ** -8 : dtype === 'f16' ? 2 ** -11 : 0) + K * 2 ** -22;
  for (let s = 0; s < 16; s++) {
    const t = (s * 7919) % T;
    const n = (s * 104729 + 3) % N;
    let sum = 0;
    let scale = 0;
    for (let i = 0; i < K; i++) {
      const x = valueAt(dtype, data.aWords, t * K + i) * valueAt(dtype, data.wWords, n * K + i);
      sum += x;
      scale += Math.abs(x);
    }
    const got = valueAt(dtype, data.out, t * N + n);
    if (!(Math.abs(got - sum) <= tolerance * Math.max(scale, 1e-30) + 1e-6)) {
      throw new Error(`timeProjectionGemm: C[${t}, ${n}] = ${got}, expected ${sum} (f64); the GEMM is wrong for T=${T} K=${K} N=${N} ${dtype}`);
    }
  }
}
