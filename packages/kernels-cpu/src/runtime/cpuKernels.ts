import { numel } from '@kvkit/contracts';
import type { DType, Shape, TensorData } from '@kvkit/contracts';
import { encodeTensorData, layoutOf, TYPED_ARRAY_MAX_LENGTH } from '@kvkit/contracts/backend';
import type { BackendKernels, ViewLayout, CopySlotsChecked, CreateKvMaterializerChecked, DequantizeKvChecked, PagedAttentionChecked, FusedNormRopeStackedChecked, MaterializerKernels, MlaPoolFusedChecked, OwnedTensor, RopePoolFusedChecked, TensorLimit } from '@kvkit/contracts/backend';
import { fusedNormRopeStacked } from '../ops/fusedNormRopeStacked.js';
import { createKvMaterializer } from '../ops/kvMaterializer.js';
import { poolTarget, readPoolRows } from '../ops/poolStore.js';
import { ropePoolFused } from '../ops/ropePoolFused.js';
import { mlaPoolFused } from '../ops/mlaPoolFused.js';
import { copySlots } from '../ops/copySlots.js';
import { pagedAttention } from '../ops/pagedAttention.js';
import { allocateStorage, CpuTensor } from './cpuTensor.js';
import type { Storage } from './cpuTensor.js';
import { decodeToF32, floatAccess } from './floatAccess.js';
import type { FloatAccess } from './floatAccess.js';

/** Buffers this backend has allocated: tensors, workspaces, caches. Steady-state calls leave it unchanged. */
export interface CpuBackendStats {
  /** Buffers allocated since the backend was made. */
  readonly buffersAllocated: number;
  /** Their bytes, in all. */
  readonly bytesAllocated: number;
}

let instances = 0;

const TYPED_ARRAY_LIMIT: TensorLimit = { elements: TYPED_ARRAY_MAX_LENGTH, reason: 'each tensor is one JavaScript typed array, of at most 2^32 elements' };

/** The CPU kernels: every float computed in f64 and rounded once to the output dtype. */
export class CpuKernels implements BackendKernels {
  readonly kind = 'cpu' as const;
  readonly label: string;
  disposed = false;
  #buffers = 0;
  #bytes = 0;

  constructor() {
    instances += 1;
    this.label = `cpu backend #${instances}`;
  }

  get stats(): CpuBackendStats {
    return { buffersAllocated: this.#buffers, bytesAllocated: this.#bytes };
  }

  /** Every buffer goes through here, so `stats` sees it. */
  storage(dtype: DType, length: number): Storage {
    return this.#counted(allocateStorage(dtype, length));
  }

  /** f64 room for tables and rows the kernels keep. */
  float64(length: number): Float64Array {
    return this.#counted(new Float64Array(length));
  }

  #counted<B extends ArrayBufferView>(buffer: B): B {
    this.#buffers += 1;
    this.#bytes += buffer.byteLength;
    return buffer;
  }

  allocate(dtype: DType, shape: Shape): CpuTensor {
    return new CpuTensor(this, dtype, Object.freeze([...shape]), this.storage(dtype, numel(shape)));
  }

  /** A validated tensor is one of ours (the contracts checked its owner). */
  own(t: OwnedTensor): CpuTensor {
    return t as CpuTensor;
  }

  floats(t: OwnedTensor): FloatAccess {
    const own = this.own(t);
    return floatAccess(own.dtype, own.data);
  }

  /** An exact f32 copy that outlives the tensor (f16 and bf16 values are all f32 values). */
  f32Copy(t: OwnedTensor): Float32Array {
    const own = this.own(t);
    return decodeToF32(own.dtype, own.data, this.storage('f32', own.data.length) as Float32Array);
  }

  /** Each tensor is one typed array, and Node 20's V8 makes those up to 2^32 elements. */
  tensorLimit(): TensorLimit {
    return TYPED_ARRAY_LIMIT;
  }

  /** Every tensor lives on the host: value rules are checked before anything is written. */
  hostValues(t: OwnedTensor): ArrayLike<number | bigint> {
    const own = this.own(t);
    return own.dtype === 'i32' || own.dtype === 'i64' || own.dtype === 'f32' ? own.data : decodeToF32(own.dtype, own.data);
  }

  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor {
    const t = this.allocate(dtype, shape);
    if (data !== undefined) encodeTensorData(dtype, data, t.data);
    return t;
  }

  tensorFromBytes(dtype: DType, shape: Shape, bytes: Uint8Array): OwnedTensor {
    const t = this.allocate(dtype, shape);
    new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength).set(bytes);
    return t;
  }

  view(base: OwnedTensor, shape: Shape, layout: ViewLayout): OwnedTensor {
    const own = this.own(base);
    return CpuTensor.view(own, shape, { ...layoutOf(own), ...layout });
  }

  read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array> {
    const { dtype, data } = this.own(t);
    // Copied now, so a read started inside writeLayerKv sees the view's contents.
    if (dtype === 'i32' || dtype === 'i64' || dtype === 'f32') return Promise.resolve((data as Float32Array | Int32Array | BigInt64Array).slice());
    return Promise.resolve(decodeToF32(dtype, data));
  }

  /** Copied now, as `read` is. */
  readBytes(t: OwnedTensor): Promise<ArrayBuffer> {
    const { data } = this.own(t);
    return Promise.resolve((data.buffer as ArrayBuffer).slice(data.byteOffset, data.byteOffset + data.byteLength));
  }

  fusedNormRopeStacked(args: FusedNormRopeStackedChecked): { kOut: OwnedTensor; vOut: OwnedTensor } {
    return fusedNormRopeStacked(this, args);
  }

  createKvMaterializer(args: CreateKvMaterializerChecked): MaterializerKernels {
    return createKvMaterializer(this, args);
  }

  ropePoolFused(args: RopePoolFusedChecked): { qRot: OwnedTensor; kRot: OwnedTensor } {
    return ropePoolFused(this, args);
  }

  mlaPoolFused(args: MlaPoolFusedChecked): { qRot?: OwnedTensor } {
    return mlaPoolFused(this, args);
  }

  dequantizeKv(args: DequantizeKvChecked): void {
    readPoolRows(poolTarget(this, args.pool, args.scale, args.layout, args.dims), this.own(args.slots).data, this.floats(args.rows));
  }

  pagedAttention(args: PagedAttentionChecked): { out: OwnedTensor; lse: OwnedTensor } {
    return pagedAttention(this, args);
  }

  copySlots(args: CopySlotsChecked): void {
    copySlots(this, args);
  }

  /** Nothing is deferred on the CPU: every op has finished when it returns. */
  sync(): Promise<void> {
    return Promise.resolve();
  }

  /** Nothing to submit: the results are in host memory when an op returns. */
  flush(): void {}

  dispose(): void {
    this.disposed = true;
  }
}
