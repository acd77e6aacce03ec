import { contiguousStrides, DroppedTensors, LAYER_VIEW, TENSOR_LAYOUT, TENSOR_OWNER } from '@kvkit/contracts/backend';
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
export const ELEMENT_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, i64: 8 };

/**
 * A tensor in device memory: its own allocation, or (a layer view handed to
 * writeLayerKv) a window of a materializer workspace that it does not own.
 */
export class CudaTensor implements OwnedTensor {
  readonly backend = 'cuda' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  declare readonly [TENSOR_LAYOUT]?: StorageLayout;
  readonly strides: readonly number[];
  readonly #buffer: DeviceBuffer;
  readonly #offset: number;
  readonly #owns: boolean;
  readonly #base: CudaTensor | undefined;
  #released = false;

  constructor(
    owner: TensorOwner,
    readonly dtype: DType,
    readonly shape: Shape,
    buffer: DeviceBuffer,
    view?: { byteOffset: number; layer?: number; base?: CudaTensor; layout?: StorageLayout },
  ) {
    this[TENSOR_OWNER] = owner;
    this.#buffer = buffer;
    this.#offset = view?.byteOffset ?? 0;
    this.#owns = view === undefined;
    this.#base = view?.base;
    this.strides = Object.freeze(view?.layout ? [...view.layout.strides] : contiguousStrides(shape));
    if (view?.layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: view.layer, enumerable: false });
    if (view?.layout) Object.defineProperty(this, TENSOR_LAYOUT, { value: view.layout, enumerable: false });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed || (this.#base?.disposed ?? false);
  }

  /** Byte offset of element 0 in the allocation. */
  get byteOffset(): number {
    return this.#offset;
  }

  /** Device address of the first element (0 for an empty tensor). */
  get ptr(): number {
    return this.#buffer.ptr + this.#offset;
  }

  get byteLength(): number {
    let n = ELEMENT_BYTES[this.dtype];
    for (const d of this.shape) n *= d;
    return n;
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
