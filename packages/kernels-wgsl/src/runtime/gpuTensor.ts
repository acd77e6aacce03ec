import { contiguousStrides, DroppedTensors, LAYER_VIEW, storageBytes, TENSOR_LAYOUT, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor, StorageLayout, ViewLayout } from '@kvkit/contracts/backend';
import type { BufferRange, DeviceStorage } from './gpuRuntime.js';

/** Bytes per element on the device: fp8 packs four per u32 word, f16/bf16 two, i64 is two words (low first). */
export const bytesPerElement: (dtype: DType) => number = storageBytes;

/** Storage of owned tensors collected undisposed goes back as dispose() would give it. */
const dropped = new DroppedTensors<DeviceStorage>((storage) => storage.release());

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

/**
 * A tensor of the WebGPU backend: a byte range of a device buffer (its own,
 * or, for the per-layer views handed to writeLayerKv, a 256-byte-aligned
 * slice of a materializer workspace).
 */
export class GpuTensor implements OwnedTensor {
  readonly backend = 'webgpu' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  declare readonly [TENSOR_LAYOUT]?: StorageLayout;
  readonly strides: readonly number[];
  readonly numel: number;
  /** Bytes of data (a packed f16/bf16 tensor of odd length ends halfway through its last word). */
  readonly byteLength: number;
  #storage: DeviceStorage | undefined;
  readonly #ownsStorage: boolean;
  /** A view's base: the view dies with it. */
  readonly #base: GpuTensor | undefined;
  #released = false;

  constructor(
    owner: TensorOwner,
    readonly dtype: DType,
    readonly shape: Shape,
    storage: DeviceStorage | undefined,
    readonly byteOffset: number,
    options: { layer?: number; ownsStorage: boolean; base?: GpuTensor; layout?: StorageLayout },
  ) {
    this[TENSOR_OWNER] = owner;
    this.numel = shape.reduce((n, d) => n * d, 1);
    this.byteLength = this.numel * bytesPerElement(dtype);
    this.strides = Object.freeze(options.layout ? [...options.layout.strides] : contiguousStrides(shape));
    this.#storage = storage;
    this.#ownsStorage = options.ownsStorage;
    this.#base = options.base;
    if (storage === undefined) this.#released = true;
    else if (options.ownsStorage) dropped.watch(this, storage);
    if (options.layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: options.layer, enumerable: false });
    if (options.layout) Object.defineProperty(this, TENSOR_LAYOUT, { value: options.layout, enumerable: false });
  }

  /** A tensor over `storage` at `layout` (wrapped memory, or a view of `base`): it shares the storage and never frees it. */
  static over(owner: TensorOwner, dtype: DType, shape: Shape, storage: DeviceStorage, layout: StorageLayout, base?: GpuTensor, rootByte = 0): GpuTensor {
    const byteOffset = rootByte + layout.offset * bytesPerElement(dtype);
    return new GpuTensor(owner, dtype, Object.freeze([...shape]), storage, byteOffset, { ownsStorage: false, layout, ...(base ? { base } : {}) });
  }

  /** A view of this tensor's storage; `layout` is absolute in the storage `root` describes (this tensor's layout). */
  view(shape: Shape, layout: ViewLayout, root: StorageLayout): GpuTensor {
    // Where element 0 of the root lies in the device buffer (a layer view starts inside a workspace).
    const rootByte = this.byteOffset - root.offset * bytesPerElement(this.dtype);
    return GpuTensor.over(this[TENSOR_OWNER], this.dtype, shape, this.storage, { ...root, ...layout }, this, rootByte);
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed || (this.#base?.disposed ?? false);
  }

  /** The device storage; only reached through validated (so live) tensors. */
  get storage(): DeviceStorage {
    return this.#storage!;
  }

  /** The bindable range (rounded up to whole words). */
  get range(): BufferRange {
    return this.#storage!.range(this.byteOffset, this.byteLength);
  }

  dispose(): void {
    if (this.#released) return;
    this.#released = true;
    if (this.#ownsStorage) {
      dropped.forget(this);
      this.#storage?.release();
    }
    this.#storage = undefined;
  }
}
