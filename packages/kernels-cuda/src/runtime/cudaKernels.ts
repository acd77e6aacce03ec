import { numel } from '@kvkit/contracts';
import type { DType, FloatDType, Shape, TensorData } from '@kvkit/contracts';
import type { BackendKernels, CopySlotsChecked, CreateKvMaterializerChecked, DequantizeKvChecked, FusedNormRopeStackedChecked, MaterializerKernels, MlaPoolFusedChecked, OwnedTensor, PagedAttentionChecked, ReadForm, RopePoolFusedChecked, RopeSpec, TensorLimit, ViewLayout } from '@kvkit/contracts/backend';
import { encodeTensorData, layoutOf, ropeAngles, ropeAnglesKey, ropeAngleTable, storageView, Workspace } from '@kvkit/contracts/backend';
import { copySlots } from '../ops/copySlots.js';
import { fusedNormRopeStacked } from '../ops/fusedNormRopeStacked.js';
import { createKvMaterializer } from '../ops/kvMaterializer.js';
import { dequantizeKv } from '../ops/kvPools.js';
import { pagedAttention } from '../ops/pagedAttention.js';
import { ropePoolFused } from '../ops/ropePoolFused.js';
import { mlaPoolFused } from '../ops/mlaPoolFused.js';
import { BadValues } from './badValues.js';
import type { CudaContext } from './context.js';
import { CUBLASLT_WORKSPACE_BYTES } from './cublasLt.js';
import type { CublasLt } from './cublasLt.js';
import { CudaTensor, ELEMENT_BYTES } from './cudaTensor.js';
import type { CudaDevice } from './driver.js';
import type { DeviceBuffer } from './memory.js';
import { StridedGather } from './gatherStrided.js';
import { convertsOnDevice, isHalf, uploadHalves, widenHalves } from './halfTransfers.js';
import { readToHost } from './hostReads.js';
import type { ReadDevice } from './hostReads.js';
import { ParamBlock } from './params.js';
import { SlotOwners } from './slotOwners.js';

let instances = 0;

/** The CUDA kernels behind `defineBackend`: tensors in device memory, ops enqueued on one stream. */
export class CudaKernels implements BackendKernels {
  readonly kind = 'cuda' as const;
  readonly label: string;
  readonly cx: CudaContext;
  readonly device: CudaDevice;
  readonly badValues: BadValues;
  /** cuBLASLt for the projection, or undefined (then the package's own GEMM runs). */
  readonly cublasLt: CublasLt | undefined;
  /** Why cuBLASLt is not used, when it is not. */
  readonly cublasLtAbsence: string | undefined;
  /** One parameter block per kernel family: launches copy them, so they are rewritten in place. */
  readonly params = {
    normRope: new ParamBlock('FusedNormRopeParams'),
    ropePool: new ParamBlock('RopePoolParams'),
    gemm: new ParamBlock('GemmParams'),
    copy: new ParamBlock('CopyParams'),
    spin: new ParamBlock('SpinParams'),
    fill: new ParamBlock('FillParams'),
    claimSlots: new ParamBlock('ClaimSlotsParams'),
    poolRead: new ParamBlock('PoolReadParams'),
    halves: new ParamBlock('HalvesParams'),
    gatherStrided: new ParamBlock('GatherStridedParams'),
    checkValues: new ParamBlock('CheckValuesParams'),
    checkSegments: new ParamBlock('CheckSegmentsParams'),
    pagedAttention: new ParamBlock('PagedAttentionParams'),
    pagedAttentionMerge: new ParamBlock('PagedAttentionMergeParams'),
    copySlots: new ParamBlock('CopySlotsParams'),
    mlaPool: new ParamBlock('MlaPoolParams'),
  };
  /** Last-token-wins claims for pool writes. */
  readonly slotOwners: SlotOwners;
  /** Contiguous copies of the views a kernel does not read through strides. */
  readonly gather: StridedGather;
  /** pagedAttention's partial rows of split requests (bytes), kept between calls. */
  readonly pagedPartials: Workspace<DeviceBuffer>;
  /** copySlots' staged source rows where source and destination share storage (bytes). */
  readonly copyStaging: Workspace<DeviceBuffer>;
  readonly #angleTables = new Map<string, DeviceBuffer>();
  readonly #applicationRoots = new Map<number, object>();
  #cublasWorkspace: DeviceBuffer | undefined;
  #disposed = false;

  constructor(cx: CudaContext, device: CudaDevice, gemm: CublasLt | { reason: string }) {
    instances += 1;
    this.cx = cx;
    this.device = device;
    this.label = `cuda backend #${instances} (${device.name})`;
    this.badValues = new BadValues(cx, this.params.checkValues);
    this.slotOwners = new SlotOwners(cx, this.params.claimSlots);
    this.gather = new StridedGather(cx, this.params.gatherStrided);
    const scratch = { allocate: (bytes: number, op: string) => cx.alloc(bytes, op), release: (b: DeviceBuffer) => b.release() };
    this.pagedPartials = new Workspace<DeviceBuffer>(scratch);
    this.copyStaging = new Workspace<DeviceBuffer>(scratch);
    if ('reason' in gemm) {
      this.cublasLt = undefined;
      this.cublasLtAbsence = gemm.reason;
    } else {
      this.cublasLt = gemm;
      this.cublasLtAbsence = undefined;
    }
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Kernels index elements in 64 bits, so one tensor may take the whole device memory (allocation may still fail: KV053). */
  tensorLimit(dtype: DType): TensorLimit {
    const bytes = this.device.totalMemoryBytes;
    return { elements: Math.floor(bytes / ELEMENT_BYTES[dtype]), reason: `64-bit element indexing, so the device's memory: ${bytes} bytes on ${this.device.name}` };
  }

  /** A validated tensor is one of ours (the contracts checked its owner). */
  own(t: OwnedTensor): CudaTensor {
    return t as CudaTensor;
  }

  /** An uninitialised tensor of this backend, its allocation freed if it is dropped undisposed. */
  allocate(dtype: DType, shape: Shape, op: string): CudaTensor {
    const frozen = Object.freeze([...shape]);
    return new CudaTensor(this, dtype, frozen, this.cx.alloc(numel(shape) * ELEMENT_BYTES[dtype], op)).releaseWhenDropped();
  }

  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor {
    const op = data === undefined ? 'empty' : 'tensor';
    this.cx.makeCurrent();
    const t = this.allocate(dtype, shape, op);
    if (data === undefined) this.cx.fill(t.ptr, 0, t.byteLength, op);
    else if (isHalf(dtype) && data instanceof Float32Array && convertsOnDevice(data.length)) uploadHalves(this, dtype, t.ptr, data, op);
    else this.cx.upload(t.ptr, hostCopy(dtype, data, numel(shape)), op);
    return t;
  }

  tensorFromBytes(dtype: DType, shape: Shape, bytes: Uint8Array): OwnedTensor {
    const op = 'tensorFromBits';
    this.cx.makeCurrent();
    const t = this.allocate(dtype, shape, op);
    this.cx.upload(t.ptr, bytes, op);
    return t;
  }

  /** A window of `base`'s storage at `layout` (validated to lie inside it): no copy, never freed, disposed with its base. */
  view(base: OwnedTensor, shape: Shape, layout: ViewLayout): OwnedTensor {
    const own = this.own(base);
    const { root, capacity } = layoutOf(own);
    return new CudaTensor(this, own.dtype, Object.freeze([...shape]), own.buffer, { root, offset: layout.offset, strides: layout.strides, capacity, base: own });
  }

  /** The storage root of application memory starting at `start` (one per allocation, so overlapping wraps are told apart from separate ones). */
  applicationStorage(start: number): object {
    let root = this.#applicationRoots.get(start);
    if (!root) {
      root = Object.freeze({ applicationMemory: start });
      this.#applicationRoots.set(start, root);
    }
    return root;
  }

  /** Enqueues the copy now (so it sees exactly the work enqueued before), resolves once it has landed. */
  async read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array> {
    const own = this.own(t);
    const data = await this.#readToHost(own, 'values', 'read');
    return own.dtype === 'i32' ? new Int32Array(data) : own.dtype === 'i64' ? new BigInt64Array(data) : new Float32Array(data);
  }

  /** The stored bytes, as they landed. */
  readBytes(t: OwnedTensor): Promise<ArrayBuffer> {
    return this.#readToHost(this.own(t), 'bits', 'readBits');
  }

  /**
   * The tensor's elements, row-major (a strided view gathered first), downloaded by copies enqueued now into
   * the array the read resolves with (runtime/hostReads.ts). The value checks of the calls before it are
   * settled on the same stream (BadValues.recordForRead).
   */
  async #readToHost(own: CudaTensor, form: ReadForm, op: 'read' | 'readBits'): Promise<ArrayBuffer> {
    const count = numel(own.shape);
    if (count === 0) return new ArrayBuffer(0);
    this.cx.makeCurrent();
    const from = this.gather.contiguous([own], op)[0]!;
    const checks = this.badValues.recordForRead(op);
    const data = await readToHost(this.#readDevice(op), from, own.dtype, count, form);
    if (checks) this.badValues.afterRead(checks);
    return data;
  }

  /** A read's stream-ordered calls; each makes the context current, as a read's later chunks are enqueued after awaits. */
  #readDevice(op: string): ReadDevice {
    const cx = this.cx;
    return {
      alloc: (bytes) => cx.alloc(bytes, op),
      copy: (dst, src, bytes) => {
        cx.makeCurrent();
        cx.copy(dst, src, bytes, op);
      },
      download: (dst, src, bytes) => {
        cx.makeCurrent();
        cx.download(dst, src, bytes, op);
      },
      widen: (dtype, src, dst, count) => {
        cx.makeCurrent();
        widenHalves(this, dtype, src, dst, count, op);
      },
      register: (target) => cx.register(target),
      unregister: (target) => cx.unregister(target, op),
      pinned: (bytes) => cx.pinned(bytes, op),
      givePinned: (block) => cx.givePinned(block),
      landed: async () => {
        cx.makeCurrent();
        const event = cx.record(op);
        await cx.wait(event, op);
        cx.recycle(event);
      },
    };
  }

  fusedNormRopeStacked(args: FusedNormRopeStackedChecked): { kOut: OwnedTensor; vOut: OwnedTensor } {
    return fusedNormRopeStacked(this, args);
  }

  dequantizeKv(args: DequantizeKvChecked): void {
    dequantizeKv(this, args);
  }

  createKvMaterializer(args: CreateKvMaterializerChecked): MaterializerKernels {
    this.cx.makeCurrent();
    return createKvMaterializer(this, args);
  }

  ropePoolFused(args: RopePoolFusedChecked): { qRot: OwnedTensor; kRot: OwnedTensor } {
    return ropePoolFused(this, args);
  }

  mlaPoolFused(args: MlaPoolFusedChecked): { qRot?: OwnedTensor } {
    return mlaPoolFused(this, args);
  }

  pagedAttention(args: PagedAttentionChecked): { out: OwnedTensor; lse: OwnedTensor } {
    return pagedAttention(this, args);
  }

  copySlots(args: CopySlotsChecked): void {
    copySlots(this, args);
  }

  /** Waits for the stream, then reports (once) the first bad position or slot a kernel met since the last sync. */
  async sync(): Promise<void> {
    if (this.#disposed) return;
    const found = await this.badValues.collect('sync');
    if (found) throw found;
  }

  /** Nothing held back: each op is launched on the backend's stream when it is called, so work queued on that stream later runs after it. */
  flush(): void {}

  /** The angle table (contracts' ropeAngleTable) of a spec, uploaded once per spec. */
  ropeAngles(spec: RopeSpec, op: string): number {
    const key = ropeAnglesKey(spec);
    const known = this.#angleTables.get(key);
    if (known) return known.ptr;
    const host = ropeAngleTable(ropeAngles(spec));
    const buffer = this.cx.alloc(host.byteLength, op);
    this.cx.upload(buffer.ptr, host, op);
    this.#angleTables.set(key, buffer);
    return buffer.ptr;
  }

  /** cuBLASLt's workspace, allocated on first use. */
  cublasWorkspace(op: string): number {
    this.#cublasWorkspace ??= this.cx.alloc(CUBLASLT_WORKSPACE_BYTES, op);
    return this.#cublasWorkspace.ptr;
  }

  dispose(): void {
    if (this.#disposed) return;
    this.#disposed = true;
    try {
      this.cx.makeCurrent();
      this.cublasLt?.destroy();
    } finally {
      this.cx.dispose();
    }
  }
}

/** The bytes to upload: data was checked by the contracts (length, representability); floats are rounded once. */
function hostCopy(dtype: DType, data: TensorData, n: number): ArrayBufferView {
  // Already laid out as stored: uploaded as given (a Float32Array bit for bit, NaN payloads included).
  if ((dtype === 'f32' && data instanceof Float32Array) || (dtype === 'i32' && data instanceof Int32Array) || (dtype === 'i64' && data instanceof BigInt64Array)) return data;
  const out = storageView(dtype, new ArrayBuffer(n * ELEMENT_BYTES[dtype]), n);
  encodeTensorData(dtype, data, out);
  return out;
}

export type { FloatDType };
