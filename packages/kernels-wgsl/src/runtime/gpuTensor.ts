import { LAYER_VIEW, TENSOR_OWNER } from '@kvkit/contracts/backend';
import type { DType, Shape } from '@kvkit/contracts';
import type { OwnedTensor } from '@kvkit/contracts/backend';
import type { BufferRange, DeviceStorage } from './gpuRuntime.js';

/** Bytes per element on the device: fp8 packs four per u32 word, f16/bf16 two, i64 is two words (low first). */
export function bytesPerElement(dtype: DType): number {
  return dtype === 'fp8e4m3' || dtype === 'fp8e5m2' ? 1 : dtype === 'f16' || dtype === 'bf16' ? 2 : dtype === 'i64' ? 8 : 4;
}

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
  readonly numel: number;
  /** Bytes of data (a packed f16/bf16 tensor of odd length ends halfway through its last word). */
  readonly byteLength: number;
  #storage: DeviceStorage | undefined;
  readonly #ownsStorage: boolean;
  #released = false;

  constructor(
    owner: TensorOwner,
    readonly dtype: DType,
    readonly shape: Shape,
    storage: DeviceStorage | undefined,
    readonly byteOffset: number,
    options: { layer?: number; ownsStorage: boolean },
  ) {
    this[TENSOR_OWNER] = owner;
    this.numel = shape.reduce((n, d) => n * d, 1);
    this.byteLength = this.numel * bytesPerElement(dtype);
    this.#storage = storage;
    this.#ownsStorage = options.ownsStorage;
    if (storage === undefined) this.#released = true;
    if (options.layer !== undefined) Object.defineProperty(this, LAYER_VIEW, { value: options.layer, enumerable: false });
  }

  /** Everything a disposed backend made reads as disposed, so its tensors fail the contracts' KV003 check. */
  get disposed(): boolean {
    return this.#released || this[TENSOR_OWNER].disposed;
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
    if (this.#ownsStorage) this.#storage?.release();
    this.#storage = undefined;
  }
}
