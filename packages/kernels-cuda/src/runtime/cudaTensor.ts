import { LAYER_VIEW, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor } from '@kvkit/contracts/backend';
import type { DeviceBuffer } from './memory.js';

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

/** Bytes per element of each dtype. */
export const ELEMENT_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, i64: 8, fp8e4m3: 1, fp8e5m2: 1 };

/**
 * A tensor in device memory: its own allocation, or (a layer view handed to
 * writeLayerKv) a window of a materializer workspace that it does not own.
 */
export class CudaTensor implements OwnedTensor {
  readonly backend = 'cuda' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  readonly #buffer: DeviceBuffer;
  readonly #offset: number;
  readonly #owns: boolean;
  #released = false;

  constructor(owner: TensorOwner, readonly dtype: DType, readonly shape: Shape, buffer: DeviceBuffer, view?: { byteOffset: number; layer: number }) {
    this[TENSOR_OWNER] = owner;
    this.#buffer = buffer;
    this.#offset = view?.byteOffset ?? 0;
    this.#owns = view === undefined;
    if (view) Object.defineProperty(this, LAYER_VIEW, { value: view.layer, enumerable: false });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed;
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

  dispose(): void {
    if (this.#released) return;
    this.#released = true;
    if (this.#owns && !this[TENSOR_OWNER].disposed) this.#buffer.release();
  }
}
