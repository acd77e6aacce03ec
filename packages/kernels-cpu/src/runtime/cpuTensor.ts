import { contiguousStrides, isContiguous, LAYER_VIEW, storageOffsets, TENSOR_LAYOUT, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor, StorageLayout } from '@kvkit/contracts/backend';

/** f32 as Float32Array, f16 and bf16 as their bit patterns, fp8 as bytes, i32 and i64 as themselves. */
export type Storage = Float32Array | Uint16Array | Uint8Array | Int32Array | BigInt64Array;

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

const RELEASED = new Float32Array(0);

/** What a `backend.view` tensor keeps: the tensor it was made from (its lifetime) and where it lies in the storage. */
export interface CpuViewOf {
  readonly base: CpuTensor;
  readonly layout: StorageLayout;
}

/** A tensor of the CPU backend: a typed array in host memory, or a view of part of one. */
export class CpuTensor implements OwnedTensor {
  readonly backend = 'cpu' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  declare readonly [TENSOR_LAYOUT]?: StorageLayout;
  readonly strides: readonly number[];
  #data: Storage;
  readonly #base: CpuTensor | undefined;
  #released = false;

  constructor(
    owner: TensorOwner,
    readonly dtype: DType,
    readonly shape: Shape,
    data: Storage,
    layer?: number,
    view?: CpuViewOf,
  ) {
    this[TENSOR_OWNER] = owner;
    this.#data = data;
    this.#base = view?.base;
    this.strides = Object.freeze(view ? [...view.layout.strides] : contiguousStrides(shape));
    if (layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: layer, enumerable: false });
    if (view) Object.defineProperty(this, TENSOR_LAYOUT, { value: view.layout, enumerable: false });
  }

  /** A view over `base`'s storage (`data` is then the whole storage): it shares it, never frees it, and dies with `base`. */
  static view(base: CpuTensor, shape: Shape, layout: StorageLayout): CpuTensor {
    return new CpuTensor(base[TENSOR_OWNER], base.dtype, Object.freeze([...shape]), base.storage, undefined, { base, layout });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed || (this.#base?.disposed ?? false);
  }

  /** The whole typed array this tensor's elements live in (a view's: its base's). */
  get storage(): Storage {
    return this.#data;
  }

  /**
   * The elements in row-major order, for kernels; only reached through validated (so live) tensors. A contiguous
   * view's is a window of the storage (writes go through); a strided view's is read through its strides into a copy.
   */
  get data(): Storage {
    const layout = this[TENSOR_LAYOUT];
    if (!layout) return this.#data;
    const n = this.shape.reduce((a, d) => a * d, 1);
    if (isContiguous(this.shape, layout.strides)) return this.#data.subarray(layout.offset, layout.offset + n) as Storage;
    const at = storageOffsets(this.shape, layout);
    const out = allocateStorage(this.dtype, n);
    for (let i = 0; i < n; i++) (out as Float32Array)[i] = (this.#data as Float32Array)[at[i]!]!;
    return out;
  }

  dispose(): void {
    this.#released = true;
    this.#data = RELEASED;
  }
}

/** Storage kinds per dtype; every buffer the backend allocates goes through here so it can be counted. */
export function allocateStorage(dtype: DType, length: number): Storage {
  switch (dtype) {
    case 'f32':
      return new Float32Array(length);
    case 'f16':
    case 'bf16':
      return new Uint16Array(length);
    case 'fp8e4m3':
    case 'fp8e5m2':
      return new Uint8Array(length);
    case 'i32':
      return new Int32Array(length);
    case 'i64':
      return new BigInt64Array(length);
  }
}
