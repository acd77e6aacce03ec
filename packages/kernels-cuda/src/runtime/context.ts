import koffi from 'koffi';
import { ATTRIBUTE, CUDA_ERROR_NOT_READY } from './driver.js';
import type { CudaDriver } from './driver.js';
import type { GpuLimits } from '../ops/rowTiles.js';
import type { CallerStream } from './callerStream.js';
import { DeviceBuffer } from './memory.js';
import type { PinnedBlock } from './memory.js';
import type { KernelName, ParamsOf } from './kernelNames.js';
import type { ParamBlock } from './params.js';

/**
 * The context current on this thread, as kvkit last made it (all driver calls come from the JS thread). Kept
 * on globalThis, so two copies of this module in one process (a bundle beside the package) track one thread.
 */
const threadState = globalThis as Record<symbol, { context: bigint | undefined } | undefined>;
const CURRENT = Symbol.for('kvkit.cuda.currentContext');
threadState[CURRENT] ??= { context: undefined };
const current = threadState[CURRENT];

const CU_STREAM_NON_BLOCKING = 1;
/** CUlaunchConfig: grid and block dims, shared bytes (7 × u32), stream, attrs, numAttrs: 56 bytes. */
const LAUNCH_CONFIG_BYTES = 56;
/** CUlaunchAttribute: id (u32, padded to 8), then a 64-byte value. */
const CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6;
const CU_EVENT_DISABLE_TIMING = 2;
/** CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, and the dynamic shared memory a kernel may take without it. */
const CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
const DEFAULT_SHARED_BYTES = 48 * 1024;
const CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
const TWO_32 = 2 ** 32;

const nextTick = () => new Promise<void>((resolve) => setImmediate(resolve));
const after = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/**
 * One device's primary context and a non-blocking stream (or a stream the
 * application made, and its context), the loaded fatbin and the memory this
 * backend owns. Every driver status is checked; a failure is
 * a KV053 ContractError naming the op, the call and the CUDA error.
 */
export class CudaContext {
  readonly #cu: CudaDriver;
  readonly device: number;
  readonly context: bigint;
  readonly stream: bigint;
  readonly module: bigint;
  readonly multiprocessors: number;
  /** What the row kernels' launches must fit in (src/ops/rowTiles.ts). */
  readonly launchLimits: GpuLimits;
  readonly #asyncAlloc: boolean;
  /** The device's default memory pool, which stream-ordered allocations come from (null without pools). */
  readonly #pool: bigint | null = null;
  readonly #functions = new Map<string, bigint>();
  /** Dynamic shared memory each kernel was allowed past the default (allowSharedBytes). */
  readonly #sharedAllowed = new Map<string, number>();
  /** Occupancy answers, by kernel, block and shared bytes. */
  readonly #resident = new Map<string, number>();
  readonly #live = new Set<DeviceBuffer>();
  readonly #events: bigint[] = [];
  readonly #timingEvents: bigint[] = [];
  readonly #allEvents: bigint[] = [];
  readonly #pinned = new Map<number, PinnedBlock[]>();
  readonly #allPinned: PinnedBlock[] = [];
  readonly #out = Buffer.alloc(256);
  readonly #outWords = new Uint32Array(this.#out.buffer, this.#out.byteOffset, 2);
  /** Whether the stream (and its context) are the application's: used, never destroyed or released. */
  readonly #callerStream: boolean;
  readonly #currentOut: (bigint | null)[] = [null];
  #disposed = false;
  #allocations = 0;
  /** cuLaunchKernelEx's config and its one attribute (programmatic stream serialization), kept at fixed addresses. */
  readonly #launchConfig = Buffer.alloc(Math.max(LAUNCH_CONFIG_BYTES, 256));
  readonly #launchAttribute = Buffer.alloc(256);
  #overlapTried = false;
  /** A second stream of this context, made on first use (auxStream), for work that runs beside the main stream's. */
  #aux: bigint | undefined;
  /** Whether launchOverlapping overlaps (Hopper or newer, cuLaunchKernelEx present), or why not. */
  #overlap: true | string;

  /**
   * Retains the device's primary context and creates the stream, or takes the
   * application's stream and its context; loads the fatbin. Throws KV053 on a
   * failing call.
   */
  constructor(cu: CudaDriver, ordinal: number, fatbin: Buffer, caller?: CallerStream) {
    this.#cu = cu;
    this.#callerStream = caller !== undefined;
    const op = 'createCudaBackend';
    const out = (call: string, status: number) => cu.check(op, call, status);
    const dev = [0];
    out('cuDeviceGet', cu.cuDeviceGet(dev, ordinal));
    this.device = dev[0]!;
    if (caller) this.context = caller.context;
    else {
      const ctx: (bigint | null)[] = [null];
      out('cuDevicePrimaryCtxRetain', cu.cuDevicePrimaryCtxRetain(ctx, this.device));
      this.context = ctx[0]!;
    }
    this.makeCurrent();
    const count = [0];
    out('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(count, ATTRIBUTE.multiprocessorCount, this.device));
    this.multiprocessors = count[0]!;
    const attribute = (which: number) => {
      const value = [0];
      out('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(value, which, this.device));
      return value[0]!;
    };
    this.launchLimits = {
      multiprocessors: this.multiprocessors,
      sharedBytesPerBlock: attribute(ATTRIBUTE.maxSharedMemoryPerBlock),
      sharedBytesPerMultiprocessor: attribute(ATTRIBUTE.maxSharedMemoryPerMultiprocessor),
      reservedSharedBytesPerBlock: attribute(ATTRIBUTE.reservedSharedMemoryPerBlock),
    };
    const pools = [0];
    out('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(pools, ATTRIBUTE.memoryPoolsSupported, this.device));
    this.#asyncAlloc = pools[0] === 1;
    if (this.#asyncAlloc) {
      // Keep freed memory in the pool across syncs: steady-state allocations then never reach the OS (dispose trims it).
      const pool: (bigint | null)[] = [null];
      out('cuDeviceGetDefaultMemPool', cu.cuDeviceGetDefaultMemPool(pool, this.device));
      this.#pool = pool[0]!;
      const threshold = new BigUint64Array([0xffffffffffffffffn]);
      out('cuMemPoolSetAttribute', cu.cuMemPoolSetAttribute(this.#pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold));
    }
    if (caller) this.stream = caller.stream;
    else {
      const stream: (bigint | null)[] = [null];
      out('cuStreamCreate', cu.cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
      this.stream = stream[0]!;
    }
    const module: (bigint | null)[] = [null];
    out('cuModuleLoadData', cu.cuModuleLoadData(module, fatbin));
    this.module = module[0]!;
    const major = [0];
    out('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(major, ATTRIBUTE.computeCapabilityMajor, this.device));
    this.#overlap = major[0]! < 9 ? 'programmatic dependent launch needs compute capability 9.0' : cu.cuLaunchKernelEx ? true : 'the driver has no cuLaunchKernelEx';
    this.#launchConfig.writeBigUInt64LE(this.stream, 32);
    this.#launchConfig.writeBigUInt64LE(BigInt(koffi.address(this.#launchAttribute)), 40);
    this.#launchConfig.writeUInt32LE(1, 48);
    this.#launchAttribute.writeUInt32LE(CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 0);
    this.#launchAttribute.writeInt32LE(1, 8);
  }

  /** Whether launchOverlapping lets a kernel start before the one ahead of it finishes, or why not. */
  get overlap(): true | string {
    return this.#overlap;
  }

  get cu(): CudaDriver {
    return this.#cu;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Device allocations made so far (none for empty tensors). */
  get allocations(): number {
    return this.#allocations;
  }

  /** Device allocations held now: tensors (freed at dispose, or when collected undisposed), workspaces, tables. */
  get liveAllocations(): number {
    return this.#live.size;
  }

  makeCurrent(): void {
    if (this.#callerStream) {
      // The application may make another context current between kvkit's calls: ask the driver, not the cache.
      this.#cu.check('cuda', 'cuCtxGetCurrent', this.#cu.cuCtxGetCurrent(this.#currentOut));
      if (this.#currentOut[0] === this.context) {
        current.context = this.context;
        return;
      }
    } else if (current.context === this.context) return;
    this.#cu.check('cuda', 'cuCtxSetCurrent', this.#cu.cuCtxSetCurrent(this.context));
    current.context = this.context;
  }

  /** Device memory, stream-ordered where the device has memory pools. */
  alloc(bytes: number, op: string): DeviceBuffer {
    if (bytes === 0) return new DeviceBuffer(0, 0, () => {});
    this.makeCurrent();
    const status = this.#asyncAlloc ? this.#cu.cuMemAllocAsync(this.#out, bytes, this.stream) : this.#cu.cuMemAlloc(this.#out, bytes);
    if (status !== 0) this.#cu.check(op, this.#asyncAlloc ? 'cuMemAllocAsync' : 'cuMemAlloc', status);
    const buffer = new DeviceBuffer(this.#outWords[0]! + this.#outWords[1]! * TWO_32, bytes, (b) => this.#free(b));
    this.#live.add(buffer);
    this.#allocations += 1;
    return buffer;
  }

  #free(buffer: DeviceBuffer): void {
    this.#live.delete(buffer);
    if (this.#disposed) return;
    this.makeCurrent();
    // Stream-ordered: work already enqueued on the buffer finishes first.
    const status = this.#asyncAlloc ? this.#cu.cuMemFreeAsync(buffer.ptr, this.stream) : this.#cu.cuMemFree(buffer.ptr);
    if (status !== 0) this.#cu.check('dispose', this.#asyncAlloc ? 'cuMemFreeAsync' : 'cuMemFree', status);
  }

  /** Host to device, ordered on the stream; the source may be reused once this returns. */
  upload(dst: number, src: ArrayBufferView, op: string): void {
    if (src.byteLength === 0) return;
    this.makeCurrent();
    const status = this.#cu.cuMemcpyHtoDAsync(dst, src, src.byteLength, this.stream);
    if (status !== 0) this.#cu.check(op, 'cuMemcpyHtoDAsync', status);
  }

  /**
   * Page-locks host memory of the caller's for a download straight into it; false where the driver refuses
   * (the caller then stages through `pinned`). Undone by `unregister`.
   */
  register(target: ArrayBuffer | Uint8Array): boolean {
    this.makeCurrent();
    // A driver or sandbox may refuse to lock ordinary memory: no fault of the call, only a slower path.
    return this.#cu.cuMemHostRegister(target, target.byteLength, 0) === 0;
  }

  unregister(target: ArrayBuffer | Uint8Array, op: string): void {
    this.makeCurrent();
    this.#cu.check(op, 'cuMemHostUnregister', this.#cu.cuMemHostUnregister(target));
  }

  download(dst: bigint | Uint8Array, src: number, bytes: number, op: string): void {
    const status = this.#cu.cuMemcpyDtoHAsync(dst, src, bytes, this.stream);
    if (status !== 0) this.#cu.check(op, 'cuMemcpyDtoHAsync', status);
  }

  copy(dst: number, src: number, bytes: number, op: string): void {
    if (bytes === 0) return;
    const status = this.#cu.cuMemcpyDtoDAsync(dst, src, bytes, this.stream);
    if (status !== 0) this.#cu.check(op, 'cuMemcpyDtoDAsync', status);
  }

  fill(dst: number, byte: number, bytes: number, op: string): void {
    if (bytes === 0) return;
    const status = this.#cu.cuMemsetD8Async(dst, byte, bytes, this.stream);
    if (status !== 0) this.#cu.check(op, 'cuMemsetD8Async', status);
  }

  /**
   * Lets `name` launch with `bytes` of dynamic shared memory: past the 48 KiB every kernel may take, the
   * driver needs the kernel's own limit raised first (once per size it grows to).
   */
  allowSharedBytes(name: KernelName, bytes: number, op: string): void {
    if (bytes <= DEFAULT_SHARED_BYTES || (this.#sharedAllowed.get(name) ?? 0) >= bytes) return;
    const status = this.#cu.cuFuncSetAttribute(this.kernel(name), CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes);
    if (status !== 0) this.#cu.check(op, `cuFuncSetAttribute(${name})`, status);
    this.#sharedAllowed.set(name, bytes);
  }

  /** Blocks of `name` one multiprocessor holds at once with `block` threads and `sharedBytes` of dynamic shared memory (at least 1). */
  residentBlocks(name: KernelName, block: number, sharedBytes: number, op: string): number {
    const key = `${name} ${block} ${sharedBytes}`;
    const known = this.#resident.get(key);
    if (known !== undefined) return known;
    const blocks = [0];
    const status = this.#cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(blocks, this.kernel(name), block, sharedBytes);
    if (status !== 0) this.#cu.check(op, `cuOccupancyMaxActiveBlocksPerMultiprocessor(${name})`, status);
    const resident = Math.max(1, blocks[0]!);
    this.#resident.set(key, resident);
    return resident;
  }

  /** A kernel of the fatbin, looked up once. */
  kernel(name: KernelName): bigint {
    const known = this.#functions.get(name);
    if (known !== undefined) return known;
    const fn: (bigint | null)[] = [null];
    this.#cu.check('cuda', `cuModuleGetFunction(${name})`, this.#cu.cuModuleGetFunction(fn, this.module, name));
    this.#functions.set(name, fn[0]!);
    return fn[0]!;
  }

  launch<K extends KernelName>(name: K, params: ParamBlock<ParamsOf<K>>, gridX: number, gridY: number, block: number, sharedBytes: number, op: string, gridZ = 1, stream = this.stream): void {
    const status = this.#cu.cuLaunchKernel(this.kernel(name), gridX, gridY, gridZ, block, 1, 1, sharedBytes, stream, params.argv, null);
    if (status !== 0) this.#cu.check(op, `cuLaunchKernel(${name})`, status);
  }

  /**
   * A launch that may start while the kernel ahead of it on the stream is
   * still running (programmatic dependent launch, once that kernel signals
   * it): the kernel itself waits (griddepcontrol.wait) before it reads what
   * the one ahead writes. A plain launch where the device or driver cannot.
   */
  launchOverlapping<K extends KernelName>(name: K, params: ParamBlock<ParamsOf<K>>, grid: number, block: number, sharedBytes: number, op: string): void {
    if (this.#overlap !== true) {
      this.launch(name, params, grid, 1, block, sharedBytes, op);
      return;
    }
    const config = this.#launchConfig;
    config.writeUInt32LE(grid, 0);
    config.writeUInt32LE(1, 4);
    config.writeUInt32LE(1, 8);
    config.writeUInt32LE(block, 12);
    config.writeUInt32LE(1, 16);
    config.writeUInt32LE(1, 20);
    config.writeUInt32LE(sharedBytes, 24);
    const status = this.#cu.cuLaunchKernelEx!(config, this.kernel(name), params.argv, null);
    if (status !== 0 && !this.#overlapTried) {
      // The first try tells whether this driver takes the attribute; without it the kernel still runs, in order.
      this.#overlap = `cuLaunchKernelEx failed with ${this.#cu.errorName(status)}`;
      this.launch(name, params, grid, 1, block, sharedBytes, op);
      return;
    }
    this.#overlapTried = true;
    if (status !== 0) this.#cu.check(op, `cuLaunchKernelEx(${name})`, status);
  }

  /** An event recorded now on the stream (or `stream`): it completes once everything enqueued there before it has. */
  record(op: string, timing = false, stream = this.stream): bigint {
    const pool = timing ? this.#timingEvents : this.#events;
    let event = pool.pop();
    if (event === undefined) {
      const made: (bigint | null)[] = [null];
      this.#cu.check(op, 'cuEventCreate', this.#cu.cuEventCreate(made, timing ? 0 : CU_EVENT_DISABLE_TIMING));
      event = made[0]!;
      this.#allEvents.push(event);
    }
    const status = this.#cu.cuEventRecord(event, stream);
    if (status !== 0) this.#cu.check(op, 'cuEventRecord', status);
    return event;
  }

  /**
   * This context's second stream (non-blocking, made on first use, destroyed
   * at dispose): work enqueued there runs beside the main stream's, ordered
   * with it only by `order`.
   */
  auxStream(op: string): bigint {
    if (this.#aux !== undefined) return this.#aux;
    this.makeCurrent();
    const stream: (bigint | null)[] = [null];
    this.#cu.check(op, 'cuStreamCreate', this.#cu.cuStreamCreate(stream, CU_STREAM_NON_BLOCKING));
    this.#aux = stream[0]!;
    return this.#aux;
  }

  /** Work enqueued on `to` from now on runs after everything enqueued on `from` so far (an event, never a host wait). */
  order(from: bigint, to: bigint, op: string): void {
    this.queueWait(to, this.record(op, false, from), op);
  }

  /** Work enqueued on `stream` from now on runs after `event` (from `record`) completes; the event goes back to the pool. */
  queueWait(stream: bigint, event: bigint, op: string): void {
    const status = this.#cu.cuStreamWaitEvent(stream, event, 0);
    // The wait took the event's state at this call: re-recording it later does not move what `stream` waits for.
    this.recycle(event);
    if (status !== 0) this.#cu.check(op, 'cuStreamWaitEvent', status);
  }

  recycle(event: bigint, timing = false): void {
    (timing ? this.#timingEvents : this.#events).push(event);
  }

  /** Resolves once the event completes, yielding to the event loop meanwhile; a device fault rejects with KV053. */
  async wait(event: bigint, op: string): Promise<void> {
    for (let polls = 0; ; polls++) {
      if (this.#disposed) return;
      this.makeCurrent();
      const status = this.#cu.cuEventQuery(event);
      if (status === 0) return;
      if (status !== CUDA_ERROR_NOT_READY) this.#cu.check(op, 'cuEventQuery', status);
      await (polls < 200 ? nextTick() : after(polls < 2000 ? 0 : 1));
    }
  }

  /** Blocks until the stream is idle. */
  synchronize(op: string): void {
    this.makeCurrent();
    this.#cu.check(op, 'cuStreamSynchronize', this.#cu.cuStreamSynchronize(this.stream));
  }

  elapsedMs(start: bigint, end: bigint, op: string): number {
    this.makeCurrent();
    const ms = [0];
    this.#cu.check(op, 'cuEventElapsedTime', this.#cu.cuEventElapsedTime(ms, start, end));
    return ms[0]!;
  }

  /** Page-locked host memory of at least `bytes`, from a pool of power-of-two sizes. */
  pinned(bytes: number, op: string): PinnedBlock {
    let size = 4096;
    while (size < bytes) size *= 2;
    const free = this.#pinned.get(size);
    const reused = free?.pop();
    if (reused) return reused;
    // In this context: a block allocated in another backend's would be freed with that context, and is page-locked only there.
    this.makeCurrent();
    const p: (bigint | null)[] = [null];
    this.#cu.check(op, 'cuMemHostAlloc', this.#cu.cuMemHostAlloc(p, size, 0));
    const block = { ptr: p[0]!, size, view: koffi.view(p[0]!, size) };
    this.#allPinned.push(block);
    return block;
  }

  givePinned(block: PinnedBlock): void {
    const free = this.#pinned.get(block.size);
    if (free) free.push(block);
    else this.#pinned.set(block.size, [block]);
  }

  /**
   * Frees everything this context allocated, hands the pool's unused memory
   * back to the device and releases the primary context (an application's
   * stream and context are left as they were). The first failing
   * call is thrown after all cleanup ran, unless the context had already
   * faulted (that error was thrown where it happened).
   */
  dispose(): void {
    if (this.#disposed) return;
    this.makeCurrent();
    const cu = this.#cu;
    const failures: [string, number][] = [];
    const attempt = (call: string, status: number) => {
      if (status !== 0) failures.push([call, status]);
    };
    attempt('cuStreamSynchronize', cu.cuStreamSynchronize(this.stream));
    if (this.#aux !== undefined) attempt('cuStreamSynchronize', cu.cuStreamSynchronize(this.#aux));
    for (const buffer of this.#live) attempt(this.#asyncAlloc ? 'cuMemFreeAsync' : 'cuMemFree', this.#asyncAlloc ? cu.cuMemFreeAsync(buffer.ptr, this.stream) : cu.cuMemFree(buffer.ptr));
    this.#live.clear();
    attempt('cuStreamSynchronize', cu.cuStreamSynchronize(this.stream));
    // The pool outlives this backend while anything else holds the primary context (another backend, the CUDA
    // runtime under cuBLASLt): untrimmed, it keeps its peak, and Vulkan in this process then finds no memory.
    if (this.#pool !== null) attempt('cuMemPoolTrimTo', cu.cuMemPoolTrimTo(this.#pool, 0));
    this.#disposed = true;
    for (const block of this.#allPinned) attempt('cuMemFreeHost', cu.cuMemFreeHost(block.ptr));
    for (const event of this.#allEvents) attempt('cuEventDestroy', cu.cuEventDestroy(event));
    attempt('cuModuleUnload', cu.cuModuleUnload(this.module));
    // Ours on either kind of stream: made in this context, so gone before a primary context is released.
    if (this.#aux !== undefined) attempt('cuStreamDestroy', cu.cuStreamDestroy(this.#aux));
    if (!this.#callerStream) {
      attempt('cuStreamDestroy', cu.cuStreamDestroy(this.stream));
      attempt('cuDevicePrimaryCtxRelease', cu.cuDevicePrimaryCtxRelease(this.device));
    }
    current.context = undefined;
    const first = failures[0];
    if (first && cu.faulted === undefined) throw cu.failure('dispose', first[0], first[1]);
  }
}
