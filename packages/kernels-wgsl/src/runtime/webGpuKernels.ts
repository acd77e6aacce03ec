import type { DType, Shape, TensorData } from '@kvkit/contracts';
import { decodeHalves, encodeTensorData, storageView } from '@kvkit/contracts/backend';
import type { BackendKernels, CreateKvMaterializerChecked, FusedNormRopeStackedChecked, MaterializerKernels, OwnedTensor, RopePoolFusedChecked } from '@kvkit/contracts/backend';
import { ContractError } from '@kvkit/errors-catalog';
import { fusedNormRopeStacked } from '../ops/fusedNormRopeStacked.js';
import { createKvMaterializer } from '../ops/kvMaterializer.js';
import { ropePoolFused } from '../ops/ropePoolFused.js';
import { DeviceChecks } from './deviceChecks.js';
import { DeviceStorage } from './gpuRuntime.js';
import type { GpuRuntime } from './gpuRuntime.js';
import { bytesPerElement, GpuTensor } from './gpuTensor.js';

/** Buffers a backend holds now and has created so far; steady-state calls leave `created` unchanged. */
export interface WebGpuBackendStats {
  readonly liveBuffers: number;
  readonly buffersCreated: number;
  /** Freed op-output buffers kept for reuse. */
  readonly recycledBuffers: number;
  readonly pipelines: number;
  /** Kernel dispatches recorded, and command buffers submitted (ops are batched: submits happen at read, sync, or a full batch). */
  readonly dispatches: number;
  readonly submits: number;
}

let instances = 0;

/** Recycled output buffers kept per byte size, and in all. */
const RECYCLED_PER_SIZE = 4;
const RECYCLED_MAX_BYTES = 2 ** 31;

/** The WebGPU kernels behind one backend: tensors on device buffers, ops recorded into the runtime's batch. */
export class WebGpuKernels implements BackendKernels {
  readonly kind = 'webgpu' as const;
  readonly label: string;
  readonly runtime: GpuRuntime;
  readonly checks: DeviceChecks;
  disposed = false;
  readonly #ownsDevice: boolean;
  readonly #live = new Set<DeviceStorage>();
  #created = 0;
  /** Scratch every op may use between its own dispatches (the GPU runs them in order), grown by doubling. */
  readonly #scratch = new Map<string, DeviceStorage>();
  /** Freed buffers of fully-overwritten op outputs, by byte size, for the next output of that size. */
  readonly #recycled = new Map<number, { buffer: GPUBuffer; id: number }[]>();
  #recycledBytes = 0;

  /** A software adapter (SwiftShader): right answers, no measure of GPU speed. */
  readonly software: boolean;

  constructor(runtime: GpuRuntime, ownsDevice: boolean, description: string) {
    instances += 1;
    this.software = /swiftshader|llvmpipe|lavapipe|software/i.test(description);
    this.label = `webgpu backend #${instances} (${description})`;
    this.runtime = runtime;
    this.#ownsDevice = ownsDevice;
    this.checks = new DeviceChecks(runtime);
  }

  get stats(): WebGpuBackendStats {
    return {
      liveBuffers: this.#live.size,
      buffersCreated: this.#created,
      recycledBuffers: [...this.#recycled.values()].reduce((n, l) => n + l.length, 0),
      pipelines: this.runtime.kernelCount,
      dispatches: this.runtime.dispatches,
      submits: this.runtime.submits,
    };
  }

  /** Throws KV051 if the device is gone; every entry point calls it first. */
  assertLive(op: string): void {
    this.runtime.assertDevice(op);
  }

  /**
   * A new device buffer of at least `bytes`, counted in the stats. Past the
   * device's largest binding the tensor cannot be used by a kernel: KV045
   * with the limit in elements of `dtype`.
   */
  storage(bytes: number, label: string, op: string, tooLarge?: { shape: Shape; dtype: DType }, mapped = false, recyclable = false): DeviceStorage {
    if (bytes > this.runtime.maxBufferBytes) {
      const shape = tooLarge?.shape ?? [bytes];
      const perElement = tooLarge ? bytesPerElement(tooLarge.dtype) : 1;
      throw new ContractError('KV045', op, { actual: shape, count: shape.reduce((n, d) => n * d, 1), expected: Math.floor(this.runtime.maxBufferBytes / perElement) });
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
    const list = this.#recycled.get(s.byteLength) ?? [];
    if (s.recyclable && !this.disposed && list.length < RECYCLED_PER_SIZE && this.#recycledBytes + s.byteLength <= RECYCLED_MAX_BYTES) {
      list.push({ buffer: s.buffer, id: s.id });
      this.#recycled.set(s.byteLength, list);
      this.#recycledBytes += s.byteLength;
      return;
    }
    this.runtime.destroyLater(s.buffer);
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
    const pooled = this.#recycled.get(bytes)?.pop();
    let s: DeviceStorage;
    if (pooled) {
      this.#recycledBytes -= bytes;
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
    const held = this.#scratch.get(name);
    if (held && held.byteLength >= bytes) return held;
    held?.release();
    const s = this.storage(Math.max(bytes, 2 * (held?.byteLength ?? 0)), `kvkit ${name}`, name);
    this.#scratch.set(name, s);
    return s;
  }

  own(t: OwnedTensor): GpuTensor {
    return t as GpuTensor;
  }

  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor {
    const op = data === undefined ? 'empty' : 'tensor';
    this.assertLive(op);
    if (this.disposed) return new GpuTensor(this, dtype, Object.freeze([...shape]), undefined, 0, { ownsStorage: false });
    const numel = shape.reduce((n, d) => n * d, 1);
    if (data === undefined || numel === 0) return this.allocate(dtype, shape, op);
    const s = this.storage(numel * bytesPerElement(dtype), 'kvkit tensor', op, { shape, dtype }, true);
    encodeTensorData(dtype, data, storageView(dtype, s.buffer.getMappedRange(), numel)); // f16/bf16: two per word, element 2i low
    s.buffer.unmap();
    return new GpuTensor(this, dtype, Object.freeze([...shape]), s, 0, { ownsStorage: true });
  }

  async read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array> {
    this.assertLive('read');
    const own = this.own(t);
    const bytes = await this.runtime.readBytes('read', own.storage.buffer, own.byteOffset, own.byteLength);
    switch (own.dtype) {
      case 'f32':
        return new Float32Array(bytes);
      case 'i32':
        return new Int32Array(bytes);
      case 'i64':
        return new BigInt64Array(bytes);
      default:
        return decodeHalves(own.dtype, new Uint16Array(bytes, 0, own.numel));
    }
  }

  fusedNormRopeStacked(args: FusedNormRopeStackedChecked): { kOut: OwnedTensor; vOut: OwnedTensor } {
    this.assertLive('fusedNormRopeStacked');
    return fusedNormRopeStacked(this, args);
  }

  createKvMaterializer(args: CreateKvMaterializerChecked): MaterializerKernels {
    this.assertLive('createKvMaterializer');
    return createKvMaterializer(this, args);
  }

  ropePoolFused(args: RopePoolFusedChecked): { qRot: OwnedTensor; kRot: OwnedTensor } {
    this.assertLive('ropePoolFused');
    return ropePoolFused(this, args);
  }

  async sync(): Promise<void> {
    this.assertLive('sync');
    if (this.disposed) return;
    const violation = await this.checks.collect('sync');
    await this.runtime.idle('sync');
    if (violation) throw violation;
    const error = this.runtime.deviceError;
    if (error !== undefined) {
      this.runtime.deviceError = undefined;
      if (error.outOfMemory) {
        const fix = 'Dispose of tensors no longer needed, or make pools smaller; work queued since the last sync may be lost';
        throw new ContractError('KV054', 'sync', { reason: error.message, fix }, {});
      }
      throw new Error(`kernels-wgsl: the WebGPU device reported an error (a bug in kvkit, please report it): ${error.message}`);
    }
  }

  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    this.checks.destroy();
    for (const s of this.#scratch.values()) s.release();
    this.#scratch.clear();
    for (const s of [...this.#live]) s.buffer.destroy();
    this.#live.clear();
    for (const list of this.#recycled.values()) for (const b of list) b.buffer.destroy();
    this.#recycled.clear();
    this.runtime.destroy(this.#ownsDevice);
  }
}
