import { LAYER_VIEW, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor } from '@kvkit/contracts/backend';
import type { DeviceBuffer } from './memory.js';

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

/** Bytes per element of each dtype. */
export const ELEMENT_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, i64: 8 };

/** Row-major strides of a contiguous tensor of `shape`, in elements. */
export function contiguousStrides(shape: Shape): readonly number[] {
  const strides = new Array<number>(shape.length);
  let step = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    strides[d] = step;
    step *= shape[d]!;
  }
  return Object.freeze(strides);
}

/** Where a tensor's elements sit in its allocation: the element offset of element 0 and the element strides. */
export interface CudaPlacement {
  readonly offset: number;
  readonly strides: readonly number[];
  /** The tensor whose allocation this one shows (a view): it is disposed when that one is. */
  readonly base?: CudaTensor;
  /** The layer a materializer's layer view shows (writeLayerKv). */
  readonly layer?: number;
}

/**
 * A tensor in device memory: its own allocation (or application memory it
 * wraps), or a window of one it does not own: a view of another tensor, or a
 * layer view of a materializer workspace. A window never frees the memory.
 */
export class CudaTensor implements OwnedTensor {
  readonly backend = 'cuda' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  /** Elements between neighbours along each dim (row-major for a tensor kvkit made). */
  readonly strides: readonly number[];
  /** Elements from the allocation's start to element 0. */
  readonly offset: number;
  readonly #buffer: DeviceBuffer;
  readonly #base: CudaTensor | undefined;
  readonly #owns: boolean;
  #released = false;

  constructor(owner: TensorOwner, readonly dtype: DType, readonly shape: Shape, buffer: DeviceBuffer, place?: CudaPlacement) {
    this[TENSOR_OWNER] = owner;
    this.#buffer = buffer;
    this.offset = place?.offset ?? 0;
    this.strides = place ? Object.freeze([...place.strides]) : contiguousStrides(shape);
    this.#base = place?.base;
    this.#owns = place === undefined;
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

  /** Whether the elements lie row-major with no gaps from `ptr` (strides of dims of size 1 do not matter). */
  get contiguous(): boolean {
    let step = 1;
    for (let d = this.shape.length - 1; d >= 0; d--) {
      const size = this.shape[d]!;
      if (size === 0) return true;
      if (size !== 1 && this.strides[d] !== step) return false;
      step *= size;
    }
    return true;
  }

  /** The allocation, for holders that must keep it alive past this tensor (a materializer's weights). */
  get buffer(): DeviceBuffer {
    return this.#buffer;
  }

  dispose(): void {
    if (this.#released) return;
    this.#released = true;
    if (this.#owns && !this[TENSOR_OWNER].disposed) this.#buffer.release();
  }
}
