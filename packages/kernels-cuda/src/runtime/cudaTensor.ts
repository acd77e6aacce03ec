import { contiguousStrides, DroppedTensors, isContiguous, LAYER_VIEW, TENSOR_LAYOUT, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor, StorageLayout } from '@kvkit/contracts/backend';
import type { DeviceBuffer } from './memory.js';

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

/** Allocations of owned tensors collected undisposed are freed as dispose() would free them. */
const dropped = new DroppedTensors<{ readonly buffer: DeviceBuffer; readonly owner: TensorOwner }>(({ buffer, owner }) => {
  if (!owner.disposed) buffer.release();
});

/** Bytes per element of each dtype. */
export const ELEMENT_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, i64: 8, fp8e4m3: 1, fp8e5m2: 1 };

/** Where a window's elements sit in the storage it shows (TENSOR_LAYOUT), and what it follows. */
export interface CudaPlacement extends StorageLayout {
  /** The tensor whose storage this one shows (a view): it is disposed when that one is. */
  readonly base?: CudaTensor;
  /** The layer a materializer's layer view shows (writeLayerKv). */
  readonly layer?: number;
}

/**
 * A tensor in device memory: its own allocation, or a window of memory it
 * does not own (application memory it wraps, a view of another tensor, a
 * layer view of a materializer workspace), placed by its TENSOR_LAYOUT. A
 * window never frees the memory. `buffer.ptr` is element 0 of the storage.
 */
export class CudaTensor implements OwnedTensor {
  readonly backend = 'cuda' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  readonly [TENSOR_LAYOUT]?: StorageLayout;
  /** Elements between neighbours along each dim (row-major for a tensor kvkit made). */
  readonly strides: readonly number[];
  /** Elements from the storage's start to element 0. */
  readonly offset: number;
  readonly #buffer: DeviceBuffer;
  readonly #base: CudaTensor | undefined;
  readonly #owns: boolean;
  #released = false;

  constructor(owner: TensorOwner, readonly dtype: DType, readonly shape: Shape, buffer: DeviceBuffer, place?: CudaPlacement) {
    this[TENSOR_OWNER] = owner;
    this.#buffer = buffer;
    this.offset = place?.offset ?? 0;
    this.strides = Object.freeze(place ? [...place.strides] : contiguousStrides(shape));
    this.#base = place?.base;
    this.#owns = place === undefined;
    if (place) this[TENSOR_LAYOUT] = { root: place.root, offset: place.offset, strides: this.strides, capacity: place.capacity };
    if (place?.layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: place.layer, enumerable: false });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check; a view follows its base. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed || (this.#base?.disposed ?? false);
  }

  /** Device address of element 0 (0 for an empty tensor). */
  get ptr(): number {
    return this.#buffer.ptr + this.offset * ELEMENT_BYTES[this.dtype];
  }

  /** Bytes of its elements, as a contiguous copy holds them. */
  get byteLength(): number {
    let n = ELEMENT_BYTES[this.dtype];
    for (const d of this.shape) n *= d;
    return n;
  }

  /** Whether the elements lie row-major with no gaps from `ptr`. */
  get contiguous(): boolean {
    return isContiguous(this.shape, this.strides);
  }

  /** The allocation, for holders that must keep it alive past this tensor (a materializer's weights). */
  get buffer(): DeviceBuffer {
    return this.#buffer;
  }

  /** Frees the allocation if the tensor is collected undisposed; only for memory kvkit allocated for it. */
  releaseWhenDropped(): this {
    if (this.#owns) dropped.watch(this, { buffer: this.#buffer, owner: this[TENSOR_OWNER] });
    return this;
  }

  dispose(): void {
    if (this.#released) return;
    this.#released = true;
    dropped.forget(this);
    if (this.#owns && !this[TENSOR_OWNER].disposed) this.#buffer.release();
  }
}
