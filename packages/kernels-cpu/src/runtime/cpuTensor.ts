import { LAYER_VIEW, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor } from '@kvkit/contracts/backend';

/** f32 as Float32Array, f16 and bf16 as their bit patterns, fp8 as bytes, i32 and i64 as themselves. */
export type Storage = Float32Array | Uint16Array | Uint8Array | Int32Array | BigInt64Array;

/** What a tensor asks of the backend that made it. */
export interface TensorOwner {
  readonly disposed: boolean;
}

const RELEASED = new Float32Array(0);

/** A tensor of the CPU backend: a typed array in host memory, or a view of part of one. */
export class CpuTensor implements OwnedTensor {
  readonly backend = 'cpu' as const;
  readonly [TENSOR_OWNER]: TensorOwner;
  declare readonly [LAYER_VIEW]?: number;
  #data: Storage;
  #released = false;

  constructor(
    owner: TensorOwner,
    readonly dtype: DType,
    readonly shape: Shape,
    data: Storage,
    layer?: number,
  ) {
    this[TENSOR_OWNER] = owner;
    this.#data = data;
    if (layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: layer, enumerable: false });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed;
  }

  /** The elements, for kernels; only reached through validated (so live) tensors. */
  get data(): Storage {
    return this.#data;
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
