import type { DType, Shape, TensorData } from '@kvkit/contracts';
import type { BackendKernels, CopySlotsChecked, CreateKvMaterializerChecked, DequantizeKvChecked, FusedNormRopeStackedChecked, MaterializerKernels, MlaPoolFusedChecked, OwnedTensor, PagedAttentionChecked, PreparableOp, PreparedCall, ReadForm, RopePoolFusedChecked, StorageLayout, TensorLimit, ViewLayout } from '@kvkit/contracts/backend';
import { encodeTensorData, isContiguous, landChunk, layoutOf, resultBytes, STORED_BYTES, storageView, Workspace, writtenInPlace } from '@kvkit/contracts/backend';
import { ContractError } from '@kvkit/contracts';
import { fusedNormRopeStacked } from '../ops/fusedNormRopeStacked.js';
import { createKvMaterializer } from '../ops/kvMaterializer.js';
import { copySlots } from '../ops/copySlots.js';
import { dequantizeKv } from '../ops/kvPools.js';
import { pagedAttention } from '../ops/pagedAttention.js';
import { readsStrided, ropePoolFused } from '../ops/ropePoolFused.js';
import { mlaPoolFused, mlaReadsStrided } from '../ops/mlaPoolFused.js';
import type { F16Conversion } from '../shaders/common.wgsl.js';
import { RecycledBuffers } from './recycledBuffers.js';
import { allKernels } from './registry.js';
import { DeviceChecks } from './deviceChecks.js';
import { DeviceStorage } from './gpuRuntime.js';
import type { GpuRuntime, PlannedKernel } from './gpuRuntime.js';
import { SlotOwners } from './slotOwners.js';
import { bytesPerElement, GpuTensor } from './gpuTensor.js';
import { bindable, contiguousCopy, withBindableViews } from './views.js';

/** GPUBufferUsage.COPY_SRC. */
const USAGE_COPY_SRC = 0x04;

/** Buffers a backend holds now and has created so far; steady-state calls leave `created` unchanged. */
export interface WebGpuBackendStats {
  /** Buffers the backend holds now: tensors, workspaces, tables and recycled outputs. */
  readonly liveBuffers: number;
  /** Buffers created since the backend was made; a steady-state call adds none. */
  readonly buffersCreated: number;
  /** Freed op-output buffers kept for reuse. */
  readonly recycledBuffers: number;
  /** Compute pipelines built so far, one per kernel variant used. */
  readonly pipelines: number;
  /** Kernel dispatches recorded, and command buffers submitted (ops are batched: submits happen at flush, read, sync, a full batch, or the end of a call touching the application's buffers). */
  readonly dispatches: number;
  /** Command buffers submitted (see `dispatches`). */
  readonly submits: number;
  /** Strided copies made for views that kernels do not read as they are (a fast path makes none). */
  readonly gathers: number;
  /** How the kernels convert f16 on this device: the WGSL builtins (found exact at creation) or integer code. */
  readonly f16Conversion: F16Conversion;
}

let instances = 0;

/** Recycled output buffers kept per byte size, and in all. */
const RECYCLED_PER_SIZE = 4;
const RECYCLED_MAX_BYTES = 2 ** 31;
/** Element indices in WGSL are u32. */
const U32_INDICES = 2 ** 32 - 1;

/** A tensor whose bytes are one plain range of its buffer (contiguous, and not running past it). */
function isPlainRange(t: GpuTensor): boolean {
  const layout = layoutOf(t);
  return isContiguous(t.shape, layout.strides) && t.byteOffset + Math.ceil(t.byteLength / 4) * 4 <= t.storage.buffer.size;
}

/** The WebGPU kernels behind one backend: tensors on device buffers, ops recorded into the runtime's batch. */
export class WebGpuKernels implements BackendKernels {
  readonly kind = 'webgpu' as const;
  readonly label: string;
  readonly runtime: GpuRuntime;
  readonly checks: DeviceChecks;
  /** Which token writes a slot several tokens of a call name: the contract's rule, on the device. */
  readonly slotOwners: SlotOwners;
  disposed = false;
  readonly #ownsDevice: boolean;
  readonly #live = new Set<DeviceStorage>();
  #created = 0;
  /** Scratch every op may use between its own dispatches (the GPU runs them in order), in bytes, grown by doubling. */
  readonly #scratch = new Map<string, Workspace<DeviceStorage>>();
  /** Freed buffers of fully-overwritten op outputs, by byte size, for the next output of that size. */
  readonly #recycled: RecycledBuffers<GPUBuffer>;

  /** A software adapter (SwiftShader): right answers, no measure of GPU speed. */
  readonly software: boolean;
  /** Strided copies recorded for views kernels could not bind as they are (reads, op inputs, write-backs). */
  gathers = 0;
  /** One storage per application buffer wrapped, so every tensor over it shares one root (aliasing is seen). */
  readonly #wrapped = new WeakMap<GPUBuffer, DeviceStorage>();

  constructor(runtime: GpuRuntime, ownsDevice: boolean, description: string) {
    instances += 1;
    allKernels.add(this);
    this.software = /swiftshader|llvmpipe|lavapipe|software/i.test(description);
    this.label = `webgpu backend #${instances} (${description})`;
    this.runtime = runtime;
    this.#ownsDevice = ownsDevice;
    this.checks = new DeviceChecks(runtime);
    this.slotOwners = new SlotOwners(this);
    this.#recycled = new RecycledBuffers(RECYCLED_PER_SIZE, RECYCLED_MAX_BYTES, (buffer) => runtime.destroyLater(buffer));
  }

  get stats(): WebGpuBackendStats {
    return {
      liveBuffers: this.#live.size,
      buffersCreated: this.#created,
      recycledBuffers: this.#recycled.count,
      pipelines: this.runtime.kernelCount,
      dispatches: this.runtime.dispatches,
      submits: this.runtime.submits,
      gathers: this.gathers,
      f16Conversion: this.runtime.caps.f16,
    };
  }

  /** Throws KV051 if the device is gone; every entry point calls it first. */
  assertLive(op: string): void {
    this.runtime.assertDevice(op);
  }

  /**
   * The largest tensor of `dtype`: a kernel binds each tensor whole, so it
   * takes at most the device's largest binding (tensor() and empty() check
   * it; storage() again for buffers an op sizes itself).
   */
  tensorLimit(dtype: DType): TensorLimit {
    const { maxBufferSize, maxStorageBufferBindingSize } = this.runtime.device.limits;
    const which = maxStorageBufferBindingSize <= maxBufferSize ? 'maxStorageBufferBindingSize' : 'maxBufferSize';
    const elements = Math.floor(this.runtime.maxBufferBytes / bytesPerElement(dtype));
    if (elements > U32_INDICES) return { elements: U32_INDICES, reason: 'the kernels index elements with 32-bit unsigned integers, as WGSL does' };
    return { elements, reason: `this device binds at most ${this.runtime.maxBufferBytes} bytes: its ${which}` };
  }

  /** A new device buffer of at least `bytes`, counted in the stats; past the device's largest binding, KV045. */
  storage(bytes: number, label: string, op: string, tooLarge?: { shape: Shape; dtype: DType }, mapped = false, recyclable = false): DeviceStorage {
    if (bytes > this.runtime.maxBufferBytes) {
      const shape = tooLarge?.shape ?? [bytes];
      const limit = tooLarge ? this.tensorLimit(tooLarge.dtype) : { ...this.tensorLimit('f32'), elements: this.runtime.maxBufferBytes };
      const count = shape.reduce((n, d) => n * d, 1);
      throw new ContractError('KV045', op, { dtype: tooLarge?.dtype ?? 'byte', actual: shape, count, backend: this.label, expected: limit.elements, reason: limit.reason });
    }
    const { buffer, id } = this.runtime.createBuffer(bytes, label, mapped);
    this.#created += 1;
    return this.#track(new DeviceStorage(this.runtime, buffer, id, bytes, (freed) => this.#free(freed), recyclable));
  }

  #track(s: DeviceStorage): DeviceStorage {
    this.#live.add(s);
    return s;
  }

  /** A released buffer goes back to the recycling pool when it may, else it is destroyed once recorded work is submitted. */
  #free(s: DeviceStorage): void {
    this.#live.delete(s);
    if (s.recyclable && !this.disposed) this.#recycled.give({ buffer: s.buffer, id: s.id }, s.byteLength);
    else this.runtime.destroyLater(s.buffer);
  }

  /**
   * A tensor for an op output that the kernel overwrites entirely: a buffer
   * of the same size freed by an earlier such output is reused (work on the
   * device runs in order, so its last readers come first), sparing the
   * allocation and the zero-fill a fresh buffer costs.
   */
  allocateOverwritten(dtype: DType, shape: Shape, op: string): GpuTensor {
    const frozen = Object.freeze([...shape]);
    const bytes = frozen.reduce((n, d) => n * d, 1) * bytesPerElement(dtype);
    const pooled = this.#recycled.take(bytes);
    let s: DeviceStorage;
    if (pooled) {
      s = this.#track(new DeviceStorage(this.runtime, pooled.buffer, pooled.id, bytes, (freed) => this.#free(freed), true));
    } else {
      s = this.storage(bytes, 'kvkit op output', op, { shape: frozen, dtype }, false, true);
    }
    return new GpuTensor(this, dtype, frozen, s, 0, { ownsStorage: true });
  }

  /** A fresh zero-filled tensor. */
  allocate(dtype: DType, shape: Shape, op = 'empty'): GpuTensor {
    const numel = shape.reduce((n, d) => n * d, 1);
    return new GpuTensor(this, dtype, Object.freeze([...shape]), this.storage(numel * bytesPerElement(dtype), 'kvkit tensor', op, { shape, dtype }), 0, { ownsStorage: true });
  }

  /** A per-op scratch buffer of at least `bytes`, kept and grown by doubling. */
  scratch(name: string, bytes: number): DeviceStorage {
    let held = this.#scratch.get(name);
    if (!held) {
      held = new Workspace({ allocate: (capacity, op) => this.storage(capacity, `kvkit ${name}`, op), release: (s) => s.release() });
      this.#scratch.set(name, held);
    }
    return held.take(bytes, name);
  }

  own(t: OwnedTensor): GpuTensor {
    return t as GpuTensor;
  }

  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor {
    const op = data === undefined ? 'empty' : 'tensor';
    this.assertLive(op);
    if (this.disposed) return new GpuTensor(this, dtype, Object.freeze([...shape]), undefined, 0, { ownsStorage: false });
    const numel = shape.reduce((n, d) => n * d, 1);
    return this.runtime.scoped(() => {
      if (data === undefined || numel === 0) return this.allocate(dtype, shape, op);
      const s = this.storage(numel * bytesPerElement(dtype), 'kvkit tensor', op, { shape, dtype }, true);
      encodeTensorData(dtype, data, storageView(dtype, s.buffer.getMappedRange(), numel)); // f16/bf16: two per word, element 2i low
      s.buffer.unmap();
      return new GpuTensor(this, dtype, Object.freeze([...shape]), s, 0, { ownsStorage: true });
    });
  }

  tensorFromBytes(dtype: DType, shape: Shape, bytes: Uint8Array): OwnedTensor {
    this.assertLive('tensorFromBits');
    if (this.disposed || bytes.byteLength === 0) return this.tensor(dtype, shape, undefined);
    const s = this.storage(bytes.byteLength, 'kvkit tensor', 'tensorFromBits', { shape, dtype }, true);
    new Uint8Array(s.buffer.getMappedRange(), 0, bytes.byteLength).set(bytes); // halves two per word, element 2i low: the host's order too
    s.buffer.unmap();
    return new GpuTensor(this, dtype, Object.freeze([...shape]), s, 0, { ownsStorage: true });
  }

  view(base: OwnedTensor, shape: Shape, layout: ViewLayout): OwnedTensor {
    const own = this.own(base);
    return own.view(shape, layout, layoutOf(own));
  }

  /** The storage behind an application's buffer, made once per buffer and never destroyed by kvkit. */
  wrappedStorage(buffer: GPUBuffer): DeviceStorage {
    let s = this.#wrapped.get(buffer);
    if (!s) {
      s = new DeviceStorage(this.runtime, buffer, this.runtime.adopt(buffer), buffer.size, () => {});
      this.#wrapped.set(buffer, s);
    }
    return s;
  }

  /** A tensor over an application's buffer (validated: this device's, STORAGE usage, the view inside it). */
  wrap(buffer: GPUBuffer, dtype: DType, shape: Shape, layout: ViewLayout): GpuTensor {
    const storage = this.wrappedStorage(buffer);
    const root: StorageLayout = { root: storage, offset: layout.offset, strides: layout.strides, capacity: Math.floor(buffer.size / bytesPerElement(dtype)) };
    return GpuTensor.over(this, dtype, shape, storage, root);
  }

  /** True when the tensor lies in a buffer of the application's. */
  isWrapped(t: GpuTensor): boolean {
    return this.#wrapped.get(t.storage.buffer) === t.storage;
  }

  async readBytes(t: OwnedTensor): Promise<ArrayBuffer> {
    this.assertLive('readBits');
    return this.#readView(this.own(t), 'bits', 'readBits');
  }

  async read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array> {
    this.assertLive('read');
    const own = this.own(t);
    const data = await this.#readView(own, 'values', 'read');
    return own.dtype === 'i32' ? new Int32Array(data) : own.dtype === 'i64' ? new BigInt64Array(data) : new Float32Array(data);
  }

  /** A wrapped buffer is read with a copy, which needs COPY_SRC (KV049); a view the copy cannot take as it is, through a contiguous copy. */
  #readable(own: GpuTensor, op: string): GpuTensor {
    if (this.isWrapped(own) && (own.storage.buffer.usage & USAGE_COPY_SRC) === 0) {
      throw new ContractError('KV049', op, { arg: 'tensor', reason: `its GPUBuffer ${JSON.stringify(own.storage.buffer.label)} lacks GPUBufferUsage.COPY_SRC, which reading it takes` });
    }
    if (bindable(this, own) || (isPlainRange(own) && own.byteOffset % 4 === 0)) return own;
    return this.runtime.scoped(() => contiguousCopy(this, own, op));
  }

  /** The copy is recorded before this returns, so a contiguous copy made for it may go at once. */
  #readView(own: GpuTensor, form: ReadForm, op: string): Promise<ArrayBuffer> {
    const src = this.#readable(own, op);
    try {
      return this.#readStored(src, form, op);
    } finally {
      if (src !== own) src.dispose();
    }
  }

  /**
   * The tensor's elements as the read returns them, each staged chunk landed in the result (f16, bf16 and fp8
   * values decoded there); the value-check flags of the calls before it are settled in the same submit
   * (DeviceChecks.recordForRead).
   */
  async #readStored(own: GpuTensor, form: ReadForm, op: string): Promise<ArrayBuffer> {
    const checks = this.checks.recordForRead();
    const read = this.runtime.recordRead(own.storage.buffer, own.byteOffset, own.byteLength);
    this.runtime.flush();
    checks?.settleAfterFlush(op);
    const stored = STORED_BYTES[own.dtype];
    const out = new ArrayBuffer(own.numel * resultBytes(own.dtype, form));
    await this.runtime.landRead(op, read, (bytes, at) => {
      const first = at / stored;
      landChunk(own.dtype, form, bytes, 0, out, { first, count: Math.min(Math.floor(bytes.byteLength / stored), own.numel - first) });
    });
    return out;
  }

  fusedNormRopeStacked(args: FusedNormRopeStackedChecked): { kOut: OwnedTensor; vOut: OwnedTensor } {
    this.assertLive('fusedNormRopeStacked');
    const op = 'fusedNormRopeStacked';
    return this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => fusedNormRopeStacked(this, a)));
  }

  createKvMaterializer(args: CreateKvMaterializerChecked): MaterializerKernels {
    this.assertLive('createKvMaterializer');
    const made = this.runtime.scoped(() => withBindableViews(this, 'createKvMaterializer', args, [], (a) => createKvMaterializer(this, a)));
    return {
      materialize: (a) => withBindableViews(this, 'KvMaterializer.materialize', a, writtenInPlace['KvMaterializer.materialize']!, (b) => made.materialize(b)),
      // In one scope, so a write-back into the application's pool is submitted with the call.
      materializeInto: (a) => this.runtime.scoped(() => withBindableViews(this, 'KvMaterializer.materializeInto', a, writtenInPlace['KvMaterializer.materializeInto']!, (b) => made.materializeInto(b))),
      dispose: () => made.dispose(),
    };
  }

  dequantizeKv(args: DequantizeKvChecked): void {
    this.assertLive('dequantizeKv');
    const op = 'dequantizeKv';
    this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => dequantizeKv(this, a)));
  }

  ropePoolFused(args: RopePoolFusedChecked): { qRot: OwnedTensor; kRot: OwnedTensor } {
    this.assertLive('ropePoolFused');
    const op = 'ropePoolFused';
    return this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => ropePoolFused(this, a), (name, t) => readsStrided(this, args, name, t)));
  }

  mlaPoolFused(args: MlaPoolFusedChecked): { qRot?: OwnedTensor } {
    this.assertLive('mlaPoolFused');
    const op = 'mlaPoolFused';
    return this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => mlaPoolFused(this, a), (name, t) => mlaReadsStrided(this, name, t)));
  }

  pagedAttention(args: PagedAttentionChecked): { out: OwnedTensor; lse: OwnedTensor } {
    this.assertLive('pagedAttention');
    const op = 'pagedAttention';
    return this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => pagedAttention(this, a)));
  }

  copySlots(args: CopySlotsChecked): void {
    this.assertLive('copySlots');
    const op = 'copySlots';
    this.runtime.scoped(() => withBindableViews(this, op, args, writtenInPlace[op]!, (a) => copySlots(this, a)));
  }

  /**
   * The call planned as a dry run (no work recorded; its tables and scratch
   * made as the call would make them), the kernels it needs built ahead, then
   * the call rehearsed into an encoder never submitted (its bind groups made).
   */
  async prepare(op: PreparableOp, args: PreparedCall): Promise<void> {
    this.assertLive('prepare');
    const given = new Set<unknown>(Object.values(args));
    // Outputs made for a dry run go back to the recycled pool, where the rehearsal and then the call take them.
    const dryRun = (run: (fn: () => void) => void) => {
      const gathers = this.gathers;
      run(() => {
        const made = this.#call(op, args);
        for (const t of Object.values(made ?? {})) if (!given.has(t)) t.dispose();
      });
      this.gathers = gathers; // its copies are never submitted
    };
    let kernels: readonly PlannedKernel[] = [];
    dryRun((fn) => (kernels = this.runtime.scoped(() => this.runtime.planAhead(fn)).kernels));
    await this.runtime.buildAhead('prepare', kernels);
    this.assertLive('prepare');
    if (!this.disposed) dryRun((fn) => this.runtime.scoped(() => this.runtime.rehearse(fn)));
  }

  #call(op: PreparableOp, args: PreparedCall): Readonly<Record<string, OwnedTensor>> | undefined {
    switch (op) {
      case 'fusedNormRopeStacked':
        return this.fusedNormRopeStacked(args as FusedNormRopeStackedChecked);
      case 'ropePoolFused':
        return this.ropePoolFused(args as RopePoolFusedChecked);
      case 'dequantizeKv':
        this.dequantizeKv(args as DequantizeKvChecked);
        return undefined;
      case 'pagedAttention':
        return this.pagedAttention(args as PagedAttentionChecked);
      case 'copySlots':
        this.copySlots(args as CopySlotsChecked);
        return undefined;
      case 'mlaPoolFused':
        return this.mlaPoolFused(args as MlaPoolFusedChecked) as Readonly<Record<string, OwnedTensor>>;
    }
  }

  async sync(): Promise<void> {
    this.assertLive('sync');
    if (this.disposed) return;
    const violation = await this.runtime.scoped(() => this.checks.collect('sync'));
    await this.runtime.idle('sync');
    if (violation) throw violation;
    const error = this.runtime.deviceError;
    if (error !== undefined) {
      this.runtime.deviceError = undefined;
      if (error.outOfMemory) {
        const fix = 'Dispose of tensors no longer needed, or make pools smaller; work queued since the last sync may be lost';
        throw new ContractError('KV054', 'sync', { reason: error.message, fix }, {});
      }
      throw new Error(`kernels-wgsl: the WebGPU device refused a call of kvkit's own (a bug in kvkit, please report it): ${error.message}`);
    }
  }

  /** Submits the batch: the application's own submits after this see every op called before it. */
  flush(): void {
    this.assertLive('flush');
    if (this.disposed) return;
    this.runtime.scoped(() => this.runtime.flush());
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.checks.destroy();
    for (const w of this.#scratch.values()) w.release();
    this.#scratch.clear();
    for (const s of [...this.#live]) s.buffer.destroy();
    this.#live.clear();
    this.#recycled.clear((buffer) => buffer.destroy());
    this.runtime.destroy(this.#ownsDevice);
  }
}
