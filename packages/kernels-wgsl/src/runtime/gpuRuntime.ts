/**
 * One GPUDevice as the kernels see it: buffers, a pipeline cache keyed by
 * kernel plans, and a batch that records dispatches into one command encoder
 * and submits lazily (at flush, read, sync, or when the batch is full), so many
 * small ops do not pay a submit each. Work on a buffer the application can
 * reach (one it wrapped, or one gpuBufferOf handed it) is submitted before
 * the call that recorded it returns, unless batching is explicit: the
 * application's next submit cannot overtake it. Uniform blocks of the batch
 * are staged on the host and written just before the submit, so they land in
 * queue order with the work that reads them. The device may be the application's:
 * kvkit hears of its own errors through error scopes around its own calls,
 * and of a loss through `device.lost`, never through the device's listeners.
 */
import { ContractError } from '@kvkit/contracts';
import { READ_CHUNK_BYTES } from '@kvkit/contracts/backend';
import { planKey } from '../shaders/plan.js';
import type { DeviceCaps, KernelPlan } from '../shaders/plan.js';
import type { BindingSpec, KernelSource } from '../shaders/source.js';

/** A read's copies, recorded: `size` bytes in staging buffers of at most READ_CHUNK_BYTES each, in order. */
export interface RecordedRead {
  readonly size: number;
  readonly chunks: readonly { readonly staging: GPUBuffer; readonly bytes: number }[];
}

/** A bindable byte range of a buffer; `id` identifies the buffer for bind-group caching. */
export interface BufferRange {
  readonly buffer: GPUBuffer;
  readonly id: number;
  readonly offset: number;
  readonly size: number;
}

/** A kernel ready to dispatch; `P` its uniform fields, `R` the ranges it binds (from its generated interface). */
export interface CompiledKernel<P = any, R = any> {
  readonly key: string;
  readonly pipeline: GPUComputePipeline;
  readonly layout: GPUBindGroupLayout;
  readonly bindings: readonly BindingSpec[];
  readonly writeUniforms: (words: Uint32Array, at: number, p: P) => void;
  readonly ranges?: R;
}

/** A kernel a dry run met that the cache lacks: what `buildAhead` compiles. */
export interface PlannedKernel {
  readonly key: string;
  readonly plan: KernelPlan;
  readonly build: () => KernelSource<any, any>;
}

/** `Q` with no property beyond `P`'s: a misspelt field fails to compile even where excess-property checks do not run. */
export type Exactly<P, Q extends P> = Q & Record<Exclude<keyof Q, keyof P>, never>;

/** Timestamp writes requested for the passes begun while a profiler records. */
export interface PassTimer {
  next(): GPUComputePassTimestampWrites | undefined;
}

/** Every dispatch gets one 256-byte uniform block (the dynamic-offset alignment). */
const PARAM_BLOCK = 256;
const PARAM_BLOCKS = 256;
/** Staging buffers of one size kept for the next reads: a long read hands back many of a chunk's size. */
const POOLED_STAGING_PER_SIZE = 4;
const MAP_READ = 0x0001;
const BIND_GROUP_CACHE_MAX = 512;

const STORAGE_USAGE = 0x0080 | 0x0004 | 0x0008; // STORAGE | COPY_SRC | COPY_DST

/** `KVKIT_WGSL_DEBUG=1` prints shader compile errors and device errors as they happen (Node only). */
function debugging(): boolean {
  return Boolean((globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.KVKIT_WGSL_DEBUG);
}

export function align(n: number, to: number): number {
  return Math.ceil(n / to) * to;
}

export class GpuRuntime {
  readonly device: GPUDevice;
  readonly caps: DeviceCaps;
  readonly maxBufferBytes: number;
  readonly maxWorkgroupsPerDimension: number;
  readonly timestamps: boolean;
  /** Why the device was lost; set once, then every call throws KV051. */
  lostReason: string | undefined;
  /** The first error kvkit's own calls met (validation or out-of-memory, caught by its error scopes); surfaced by the next sync. */
  deviceError: { readonly outOfMemory: boolean; readonly message: string } | undefined;
  timer: PassTimer | undefined;
  /** Dispatches recorded and command buffers submitted so far (tests check that ops batch). */
  dispatches = 0;
  submits = 0;
  /** `batching: 'explicit'`: nothing is submitted before flush, read, sync or a full batch, whatever buffers the work touches. */
  #explicitBatching: boolean;
  /** Buffers the application can reach: its own, wrapped, and kvkit's that gpuBufferOf handed out (until their storage is freed). */
  readonly #shared = new WeakSet<GPUBuffer>();
  /** Buffers the unsubmitted batch reads or writes, and whether one of them is shared. */
  readonly #pending = new Set<GPUBuffer>();
  #pendingShared = false;

  #encoder: GPUCommandEncoder | undefined;
  #pass: GPUComputePassEncoder | undefined;
  readonly #uniform: GPUBuffer;
  #params = new Uint32Array((PARAM_BLOCK * PARAM_BLOCKS) / 4);
  #paramBlocks = 0;
  #destroyAfterSubmit: GPUBuffer[] = [];
  readonly #kernels = new Map<string, CompiledKernel>();
  readonly #bindGroups = new Map<string, GPUBindGroup>();
  readonly #staging = new Map<number, GPUBuffer[]>();
  #nextId = 1;
  readonly #lost: Promise<string>;
  #destroyed = false;
  /** True while kvkit's error scopes are pushed (a call inside another pushes none). */
  #inScope = false;
  /** Scopes popped whose answer has not come yet; a sync waits for them. */
  readonly #openScopes = new Set<Promise<void>>();
  /** The entry point running now, named by errors raised below it (ops run synchronously to their end). */
  #entry = 'sync';
  /** Builds whose compiler report is still due, and kernels whose build failed (a later call needing one throws KV055 at once). */
  #pendingBuilds: Promise<void>[] = [];
  readonly #failedBuilds = new Map<string, { readonly kernel: string; readonly log: string }>();
  /** The first failed build not yet thrown by a read or sync. */
  #unreportedBuild: { readonly kernel: string; readonly log: string } | undefined;
  /** While a dry run plans a call (`planAhead`): the kernels it needs that the cache lacks; nothing is recorded. */
  #planned: Map<string, PlannedKernel> | undefined;
  /** While a call is rehearsed (`rehearse`): the batch set aside, restored after. */
  #rehearsing: { readonly encoder: GPUCommandEncoder | undefined; readonly pass: GPUComputePassEncoder | undefined; readonly params: Uint32Array<ArrayBuffer>; readonly blocks: number; readonly dispatches: number } | undefined;
  /** Builds started ahead, by key, so two prepares of one kernel compile it once. */
  readonly #buildingAhead = new Map<string, Promise<void>>();

  constructor(device: GPUDevice, caps: DeviceCaps, timestamps: boolean, explicitBatching = false) {
    this.device = device;
    this.#explicitBatching = explicitBatching;
    this.caps = caps;
    this.timestamps = timestamps;
    this.maxBufferBytes = Math.min(device.limits.maxBufferSize, device.limits.maxStorageBufferBindingSize);
    this.maxWorkgroupsPerDimension = device.limits.maxComputeWorkgroupsPerDimension;
    this.#uniform = device.createBuffer({ size: PARAM_BLOCK * PARAM_BLOCKS, usage: 0x0040 | 0x0008, label: 'kvkit uniforms' }); // UNIFORM | COPY_DST
    this.#lost = device.lost.then((info) => {
      // Only its owner destroys a device: kvkit destroys its own at dispose(), when no call can follow.
      this.lostReason ??= info.reason === 'destroyed' ? 'the device was destroyed by its owner' : info.message || info.reason || 'unknown reason';
      return this.lostReason!;
    });
  }

  /**
   * Runs `fn` (kvkit's own device calls, up to its first await) inside error
   * scopes of its own: what they catch is kvkit's and reaches the next sync;
   * the application's errors on a shared device stay the application's.
   * Every entry point records its work inside one: at its end, work on a
   * buffer the application can reach is submitted (see `submitShared`).
   */
  scoped<T>(fn: () => T): T {
    if (this.#inScope) return fn();
    this.#inScope = true;
    this.device.pushErrorScope('out-of-memory');
    this.device.pushErrorScope('validation');
    try {
      return fn();
    } finally {
      this.submitShared();
      this.#inScope = false;
      this.#hear(this.device.popErrorScope(), false);
      this.#hear(this.device.popErrorScope(), true);
    }
  }

  #hear(popped: Promise<GPUError | null>, outOfMemory: boolean): void {
    const heard: Promise<void> = popped.then(
      (error) => {
        if (!error) return;
        this.deviceError ??= { outOfMemory, message: error.message };
        if (debugging()) console.error('kernels-wgsl: device error:', error.message);
      },
      () => {}, // a lost device may refuse to pop; the loss is what the next call reports
    );
    this.#openScopes.add(heard);
    void heard.then(() => this.#openScopes.delete(heard));
  }

  /** Throws KV051 when the device is gone; every entry point calls it first. */
  assertDevice(op: string): void {
    if (this.lostReason !== undefined) throw this.lostError(op);
    this.#entry = op;
  }

  lostError(op: string): ContractError {
    return new ContractError('KV051', op, {
      reason: this.lostReason ?? 'unknown reason',
      fix: 'Create a new backend (on a new device) and upload the inputs again; do not destroy a device passed to createWebGpuBackend while the backend is in use',
    });
  }

  /** Resolves like `p`, or rejects with KV051 as soon as the device is lost (also when `p` settles after the loss). */
  guard<T>(op: string, p: Promise<T>): Promise<T> {
    const lost = this.#lost.then(() => Promise.reject(this.lostError(op)));
    return Promise.race([p, lost]).then(
      (value) => {
        if (this.lostReason !== undefined) throw this.lostError(op);
        return value;
      },
      (e) => {
        if (this.lostReason !== undefined) throw this.lostError(op);
        throw e;
      },
    );
  }

  buildError(op: string, failed: { readonly kernel: string; readonly log: string }): ContractError {
    return new ContractError('KV055', op, {
      kernel: failed.kernel,
      log: failed.log,
      fix: 'Report it to kvkit with the log and the adapter (backend.label); meanwhile use another WebGPU implementation or backend',
    });
  }

  /**
   * After the compiler reports on every kernel built so far, throws KV055
   * for the first failed build not yet reported; the validation errors of
   * the dispatches that used it are its consequence and are dropped.
   */
  async assertBuilt(op: string): Promise<void> {
    await this.guard(op, Promise.all(this.#openScopes));
    while (this.#pendingBuilds.length > 0) await this.guard(op, Promise.all(this.#pendingBuilds.splice(0)));
    const failed = this.#unreportedBuild;
    if (failed === undefined) return;
    this.#unreportedBuild = undefined;
    if (this.deviceError && !this.deviceError.outOfMemory) this.deviceError = undefined;
    throw this.buildError(op, failed);
  }

  createBuffer(bytes: number, label: string, mapped = false): { buffer: GPUBuffer; id: number } {
    const buffer = this.device.createBuffer({ size: Math.max(16, align(bytes, 16)), usage: STORAGE_USAGE, mappedAtCreation: mapped, label });
    return { buffer, id: this.#nextId++ };
  }

  /** An id for a buffer the application made (the bind-group cache keys ranges by id); kvkit never destroys it. */
  adopt(buffer: GPUBuffer): number {
    this.#shared.add(buffer);
    return this.#nextId++;
  }

  /**
   * Marks one of kvkit's buffers as reachable by the application (gpuBufferOf
   * hands it out): work pending on it is submitted now, and later work on it
   * before its call returns, as for a wrapped buffer.
   */
  share(buffer: GPUBuffer): void {
    this.#shared.add(buffer);
    if (!this.#pending.has(buffer)) return;
    this.#pendingShared = true;
    if (!this.#explicitBatching) this.scoped(() => this.flush());
  }

  /** A freed storage's buffer is kvkit's alone again (gpuBufferOf's range was valid only while its tensor lived). */
  unshare(buffer: GPUBuffer): void {
    this.#shared.delete(buffer);
  }

  /** Runs `fn` with batching explicit (the profiler times calls back to back in one batch). */
  batched<T>(fn: () => T): T {
    const was = this.#explicitBatching;
    this.#explicitBatching = true;
    try {
      return fn();
    } finally {
      this.#explicitBatching = was;
    }
  }

  /** Submits the batch if it touches a buffer the application can reach, unless batching is explicit. */
  submitShared(): void {
    if (this.#pendingShared && !this.#explicitBatching) this.flush();
  }

  #touch(buffer: GPUBuffer): void {
    if (this.#rehearsing) return; // never submitted: no submit is owed for it
    this.#pending.add(buffer);
    if (this.#shared.has(buffer)) this.#pendingShared = true;
  }

  /** Destroys the buffer once the work recorded so far has been submitted (submitted work keeps it alive). */
  destroyLater(buffer: GPUBuffer): void {
    if (this.#rehearsing && !this.#rehearsing.encoder) {
      buffer.destroy(); // no submitted work can hold it, and the rehearsal's is never submitted
      return;
    }
    if (this.#encoder) this.#destroyAfterSubmit.push(buffer);
    else buffer.destroy();
  }

  kernel<P, R>(plan: KernelPlan, build: () => KernelSource<P, R>): CompiledKernel<P, R> {
    const key = planKey(plan);
    const cached = this.#kernels.get(key);
    if (cached) return cached;
    const failed = this.#failedBuilds.get(key);
    if (failed) throw this.buildError(this.#entry, failed);
    if (this.#planned) {
      // A dry run only notes the kernel; the placeholder is never dispatched (dispatch records nothing meanwhile).
      if (!this.#planned.has(key)) this.#planned.set(key, { key, plan, build });
      return { key, pipeline: undefined!, layout: undefined!, bindings: [], writeUniforms: () => {} };
    }
    const source = build();
    // The build's own errors go to this scope, not to the device's uncaptured errors: the report names the kernel.
    this.device.pushErrorScope('validation');
    const { module, layout, pipelineLayout } = this.#moduleAndLayout(plan, source);
    const pipeline = this.device.createComputePipeline({ label: plan.kernel, layout: pipelineLayout, compute: { module, entryPoint: 'main' } });
    this.#pendingBuilds.push(this.#reportBuild(key, plan.kernel, source.code, module, this.device.popErrorScope()));
    const compiled: CompiledKernel<P, R> = { key, pipeline, layout, bindings: source.bindings, writeUniforms: source.writeUniforms };
    this.#kernels.set(key, compiled);
    return compiled;
  }

  #moduleAndLayout(plan: KernelPlan, source: KernelSource<any, any>): { module: GPUShaderModule; layout: GPUBindGroupLayout; pipelineLayout: GPUPipelineLayout } {
    const module = this.device.createShaderModule({ code: source.code, label: plan.kernel });
    const layout = this.device.createBindGroupLayout({
      label: plan.kernel,
      entries: [
        { binding: 0, visibility: 0x4, buffer: { type: 'uniform', hasDynamicOffset: true } },
        ...source.bindings.map((b, i) => ({ binding: i + 1, visibility: 0x4, buffer: { type: b.access === 'read' ? ('read-only-storage' as const) : ('storage' as const) } })),
      ],
    });
    return { module, layout, pipelineLayout: this.device.createPipelineLayout({ bindGroupLayouts: [layout] }) };
  }

  /**
   * Runs `fn` (an op's launch glue) as a dry run: no dispatch, copy or clear is
   * recorded, and the kernels it asks for that the cache lacks are returned
   * instead of compiled. Buffers it makes (tables, scratch) are kept, as a
   * real call would keep them.
   */
  planAhead<T>(fn: () => T): { readonly result: T; readonly kernels: readonly PlannedKernel[] } {
    if (this.dryRun) throw new Error('kernels-wgsl: dry runs do not nest');
    this.#planned = new Map();
    try {
      const result = fn();
      return { result, kernels: [...this.#planned.values()] };
    } finally {
      this.#planned = undefined;
    }
  }

  /**
   * Runs `fn` (an op's launch glue, its kernels built) for real into an
   * encoder of its own that is never submitted, so nothing is written: the
   * call after it finds its bind groups made and its host code run once. The
   * batch, its staged uniforms and the counters are as they were after it.
   */
  rehearse<T>(fn: () => T): T {
    if (this.dryRun) throw new Error('kernels-wgsl: dry runs do not nest');
    this.#rehearsing = { encoder: this.#encoder, pass: this.#pass, params: this.#params, blocks: this.#paramBlocks, dispatches: this.dispatches };
    this.#encoder = undefined;
    this.#pass = undefined;
    this.#params = new Uint32Array(this.#params.length);
    this.#paramBlocks = 0;
    try {
      return fn();
    } finally {
      (this.#pass as GPUComputePassEncoder | undefined)?.end(); // the rehearsal's encoder is dropped unfinished
      const saved = this.#rehearsing;
      this.#rehearsing = undefined;
      this.#encoder = saved.encoder;
      this.#pass = saved.pass;
      this.#params = saved.params;
      this.#paramBlocks = saved.blocks;
      this.dispatches = saved.dispatches;
    }
  }

  /** True during a dry run (`planAhead`, `rehearse`): nothing it records is ever submitted, and value checks take no flag word. */
  get dryRun(): boolean {
    return this.#planned !== undefined || this.#rehearsing !== undefined;
  }

  /**
   * Compiles the planned kernels with createComputePipelineAsync and puts them
   * in the cache, so the call that needs them builds nothing. A kernel that
   * fails to build rejects with KV055, and later calls needing it throw KV055 at once.
   */
  async buildAhead(op: string, planned: readonly PlannedKernel[]): Promise<void> {
    const builds = planned.map((p) => {
      let build = this.#buildingAhead.get(p.key);
      if (!build) {
        build = this.#compileAhead(p).finally(() => this.#buildingAhead.delete(p.key));
        this.#buildingAhead.set(p.key, build);
      }
      return build;
    });
    await this.guard(op, Promise.all(builds));
    for (const p of planned) {
      const failed = this.#failedBuilds.get(p.key);
      if (failed) throw this.buildError(op, failed);
    }
  }

  async #compileAhead({ key, plan, build }: PlannedKernel): Promise<void> {
    if (this.#kernels.has(key) || this.#failedBuilds.has(key)) return;
    const source = build();
    this.device.pushErrorScope('validation');
    const { module, layout, pipelineLayout } = this.#moduleAndLayout(plan, source);
    const scope = this.device.popErrorScope();
    let pipeline: GPUComputePipeline | undefined;
    let pipelineError: string | undefined;
    try {
      pipeline = await this.device.createComputePipelineAsync({ label: plan.kernel, layout: pipelineLayout, compute: { module, entryPoint: 'main' } });
    } catch (e) {
      pipelineError = (e as Error)?.message ?? String(e);
    }
    let messages: string[] = [];
    let error: GPUError | null = null;
    try {
      const [info, scoped] = await Promise.all([module.getCompilationInfo(), scope]);
      messages = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
      error = scoped;
    } catch (e) {
      if (this.lostReason !== undefined) return; // the loss is what buildAhead reports
      pipelineError ??= `the compiler gave no report: ${(e as Error)?.message ?? String(e)}`;
    }
    if (this.#kernels.has(key)) return; // a call built it meanwhile
    if (pipeline && messages.length === 0 && !error) {
      this.#kernels.set(key, { key, pipeline, layout, bindings: source.bindings, writeUniforms: source.writeUniforms });
      return;
    }
    // Reported by the prepare that asked for it; a later call needing it throws at once.
    this.#failedBuilds.set(key, { kernel: plan.kernel, log: messages.length > 0 ? messages.join('; ') : (error?.message ?? pipelineError ?? 'unknown error') });
    if (debugging()) console.error(`kernels-wgsl: ${plan.kernel} failed to build:\n${this.#failedBuilds.get(key)!.log}\n${source.code}`);
  }

  /** Records a failed build: the compiler's errors (line:column message), else the pipeline's validation error. */
  async #reportBuild(key: string, kernel: string, code: string, module: GPUShaderModule, scope: Promise<GPUError | null>): Promise<void> {
    let info: GPUCompilationInfo;
    let error: GPUError | null;
    try {
      [info, error] = await Promise.all([module.getCompilationInfo(), scope]);
    } catch (e) {
      if (this.lostReason !== undefined) return; // the loss is what the next call reports
      info = { messages: [] } as unknown as GPUCompilationInfo;
      error = { message: `the compiler gave no report: ${(e as Error)?.message ?? String(e)}` } as GPUError;
    }
    const messages = info.messages.filter((m) => m.type === 'error').map((m) => `${m.lineNum}:${m.linePos} ${m.message}`);
    if (messages.length === 0 && !error) return;
    const failed = { kernel, log: messages.length > 0 ? messages.join('; ') : error!.message };
    this.#kernels.delete(key);
    this.#failedBuilds.set(key, failed);
    this.#unreportedBuild ??= failed;
    if (debugging()) console.error(`kernels-wgsl: ${kernel} failed to build:\n${failed.log}\n${code}`);
  }

  get kernelCount(): number {
    return this.#kernels.size;
  }

  /**
   * Records one dispatch of `workgroups` workgroups (spread over x and y past
   * the per-dimension limit). `ranges` follow the kernel's bindings; `params`
   * holds exactly its uniform fields, written where its Params struct has them.
   */
  dispatch<P, R, Q extends P>(kernel: CompiledKernel<P, R>, ranges: NoInfer<R>, params: Exactly<P, Q>, workgroups: number): void {
    if (workgroups <= 0 || this.#planned) return;
    if (this.#paramBlocks === PARAM_BLOCKS) {
      if (this.#rehearsing) this.#paramBlocks = 0; // its uniforms are never written: blocks may be reused
      else this.flush();
    }
    const block = this.#paramBlocks++;
    kernel.writeUniforms(this.#params, (block * PARAM_BLOCK) / 4, params);
    const bound = this.#separateReadsFromWrites(
      kernel,
      kernel.bindings.map((b) => (ranges as Readonly<Record<string, BufferRange>>)[b.name]!),
    );
    for (const r of bound) this.#touch(r.buffer);
    const bindGroup = this.#bindGroup(kernel, bound);
    const pass = this.#computePass();
    pass.setPipeline(kernel.pipeline);
    pass.setBindGroup(0, bindGroup, [block * PARAM_BLOCK]);
    const x = Math.min(workgroups, this.maxWorkgroupsPerDimension);
    pass.dispatchWorkgroups(x, Math.ceil(workgroups / x));
    this.dispatches += 1;
  }

  /** Records a copy between two buffers (sizes and offsets multiples of 4). */
  copy(src: GPUBuffer, srcOffset: number, dst: GPUBuffer, dstOffset: number, size: number): void {
    if (size <= 0 || this.#planned) return;
    this.#touch(src);
    this.#touch(dst);
    this.#endPass();
    this.#commandEncoder().copyBufferToBuffer(src, srcOffset, dst, dstOffset, size);
  }

  clear(buffer: GPUBuffer, offset: number, size: number): void {
    if (size <= 0 || this.#planned) return;
    this.#touch(buffer);
    this.#endPass();
    this.#commandEncoder().clearBuffer(buffer, offset, size);
  }

  /** Ends the current pass (profilers close their timed passes with it). */
  endPass(): void {
    this.#endPass();
  }

  encoderForQueries(): GPUCommandEncoder {
    this.#endPass();
    return this.#commandEncoder();
  }

  /**
   * Submits what was recorded (uniforms first, in queue order): work the
   * application submits after this runs after every op recorded before it.
   */
  flush(): void {
    if (!this.#encoder) return;
    this.#endPass();
    const encoder = this.#encoder;
    this.#encoder = undefined;
    this.#pending.clear();
    this.#pendingShared = false;
    if (this.#paramBlocks > 0) this.device.queue.writeBuffer(this.#uniform, 0, this.#params.buffer, 0, this.#paramBlocks * PARAM_BLOCK);
    this.#paramBlocks = 0;
    this.device.queue.submit([encoder.finish()]);
    this.submits += 1;
    for (const b of this.#destroyAfterSubmit.splice(0)) b.destroy();
  }

  /** Submits, then waits until the device has finished everything submitted. */
  async idle(op: string): Promise<void> {
    this.scoped(() => this.flush());
    await this.guard(op, this.device.queue.onSubmittedWorkDone());
    await this.assertBuilt(op);
  }

  /** A copy of `size` bytes at `offset` of `buffer`, as the work recorded before this call leaves them. */
  async readBytes(op: string, buffer: GPUBuffer, offset: number, size: number): Promise<ArrayBuffer> {
    const read = this.scoped(() => {
      const recorded = this.recordRead(buffer, offset, size);
      this.flush();
      return recorded;
    });
    return this.finishRead(op, read);
  }

  /**
   * Records the copies of a read into staging buffers of at most READ_CHUNK_BYTES each, all now, so the read
   * sees exactly the work recorded before it; `landRead` or `finishRead` (after a flush) maps them. Lets
   * several reads share one submit, and no staging buffer nears the device's maxBufferSize.
   */
  recordRead(buffer: GPUBuffer, offset: number, size: number): RecordedRead {
    const chunks: { staging: GPUBuffer; bytes: number }[] = [];
    for (let at = 0; at < size; at += READ_CHUNK_BYTES) {
      const bytes = align(Math.min(READ_CHUNK_BYTES, size - at), 4);
      const staging = this.#takeStaging(bytes);
      this.copy(buffer, offset + at, staging, 0, bytes);
      chunks.push({ staging, bytes });
    }
    return { size, chunks };
  }

  /**
   * Maps the read's chunks in order and hands each one's bytes (mapped memory, valid during the call) to
   * `land` with their offset in the read, then unmaps it and returns its staging buffer to the pool.
   */
  async landRead(op: string, read: RecordedRead, land: (bytes: ArrayBuffer, at: number) => void): Promise<void> {
    const maps = read.chunks.map((c) => this.guard(op, c.staging.mapAsync(MAP_READ, 0, c.bytes)));
    for (const m of maps) m.catch(() => {}); // each is awaited below, or abandoned after the first failure
    let landed = 0;
    try {
      for (const c of read.chunks) {
        await maps[landed];
        land(c.staging.getMappedRange(0, c.bytes), landed * READ_CHUNK_BYTES);
        c.staging.unmap();
        // Back in the pool only once mapped and unmapped; a build failure reported next leaves it there, intact.
        this.#returnStaging(c.staging);
        landed += 1;
      }
    } catch (e) {
      for (const c of read.chunks.slice(landed)) c.staging.destroy();
      throw e;
    }
    await this.assertBuilt(op);
  }

  /** The read's bytes in one new buffer (small reads: value-check flags, timestamps, a GEMM's output). */
  async finishRead(op: string, read: RecordedRead): Promise<ArrayBuffer> {
    const out = new ArrayBuffer(read.size);
    await this.landRead(op, read, (bytes, at) => {
      const n = Math.min(bytes.byteLength, read.size - at);
      new Uint8Array(out, at, n).set(new Uint8Array(bytes, 0, n));
    });
    return out;
  }

  destroy(destroyDevice: boolean): void {
    if (this.#destroyed) return;
    this.#destroyed = true;
    this.#encoder = undefined;
    this.#pass = undefined;
    this.#pending.clear();
    this.#pendingShared = false;
    for (const b of this.#destroyAfterSubmit.splice(0)) b.destroy();
    for (const list of this.#staging.values()) for (const b of list) b.destroy();
    this.#staging.clear();
    this.#bindGroups.clear();
    this.#kernels.clear();
    this.#uniform.destroy();
    if (destroyDevice) this.device.destroy();
  }

  #commandEncoder(): GPUCommandEncoder {
    this.#encoder ??= this.device.createCommandEncoder({ label: 'kvkit batch' });
    return this.#encoder;
  }

  #computePass(): GPUComputePassEncoder {
    if (!this.#pass) {
      const timestampWrites = this.#rehearsing ? undefined : this.timer?.next(); // a rehearsal is never timed
      this.#pass = this.#commandEncoder().beginComputePass(timestampWrites ? { timestampWrites } : {});
    }
    return this.#pass;
  }

  #endPass(): void {
    this.#pass?.end();
    this.#pass = undefined;
  }

  #bindGroup(kernel: CompiledKernel, ranges: readonly BufferRange[]): GPUBindGroup {
    const key = `${kernel.key}|${ranges.map((r) => `${r.id}:${r.offset}:${r.size}`).join('|')}`;
    let group = this.#bindGroups.get(key);
    if (!group) {
      if (this.#bindGroups.size >= BIND_GROUP_CACHE_MAX) this.#bindGroups.clear();
      group = this.device.createBindGroup({
        layout: kernel.layout,
        entries: [
          { binding: 0, resource: { buffer: this.#uniform, offset: 0, size: PARAM_BLOCK } },
          ...ranges.map((r, i) => ({ binding: i + 1, resource: { buffer: r.buffer, offset: r.offset, size: Math.max(4, r.size) } })),
        ],
      });
      this.#bindGroups.set(key, group);
    }
    return group;
  }

  /**
   * WebGPU forbids one buffer as both a read-only and a writable binding of a
   * dispatch (possible when a caller passes views of one workspace as input
   * and pool): such inputs are read from a copy.
   */
  #separateReadsFromWrites(kernel: CompiledKernel, ranges: BufferRange[]): BufferRange[] {
    const written = new Set<GPUBuffer>();
    kernel.bindings.forEach((b, i) => {
      if (b.access === 'read_write') written.add(ranges[i]!.buffer);
    });
    return ranges.map((r, i) => {
      if (kernel.bindings[i]!.access !== 'read' || !written.has(r.buffer)) return r;
      const copy = this.createBuffer(r.size, 'kvkit aliased input');
      this.copy(r.buffer, r.offset, copy.buffer, 0, align(r.size, 4));
      this.destroyLater(copy.buffer);
      return { buffer: copy.buffer, id: copy.id, offset: 0, size: r.size };
    });
  }

  /** A staging buffer of at least `bytes` (at most a read chunk), from a pool of power-of-two sizes. */
  #takeStaging(bytes: number): GPUBuffer {
    const size = 2 ** Math.max(8, Math.ceil(Math.log2(bytes)));
    const pooled = this.#staging.get(size)?.pop();
    return pooled ?? this.device.createBuffer({ size, usage: MAP_READ | 0x0008, label: 'kvkit readback' }); // MAP_READ | COPY_DST
  }

  #returnStaging(buffer: GPUBuffer): void {
    const list = this.#staging.get(buffer.size) ?? [];
    if (list.length >= POOLED_STAGING_PER_SIZE || this.#destroyed) {
      buffer.destroy();
      return;
    }
    list.push(buffer);
    this.#staging.set(buffer.size, list);
  }
}

/**
 * A device buffer shared by tensors and kernels that hold it; when the last
 * holder lets go, `onFree` destroys it (after the work recorded so far) or
 * keeps it for reuse.
 */
export class DeviceStorage {
  #refs = 1;

  constructor(
    readonly runtime: GpuRuntime,
    readonly buffer: GPUBuffer,
    readonly id: number,
    readonly byteLength: number,
    private readonly onFree: (s: DeviceStorage) => void,
    /** The buffer may serve a later output that overwrites every byte (its contents are stale, never zeroed). */
    readonly recyclable = false,
  ) {}

  get live(): boolean {
    return this.#refs > 0;
  }

  retain(): this {
    this.#refs += 1;
    return this;
  }

  release(): void {
    if (this.#refs <= 0) return;
    this.#refs -= 1;
    if (this.#refs > 0) return;
    this.runtime.unshare(this.buffer);
    this.onFree(this);
  }

  range(offset: number, size: number): BufferRange {
    return { buffer: this.buffer, id: this.id, offset, size: align(size, 4) };
  }
}
