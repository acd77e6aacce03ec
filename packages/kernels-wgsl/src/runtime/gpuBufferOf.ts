import type { Tensor } from '@kvkit/contracts';
import { isTensor, TENSOR_OWNER, validateTensorUse } from '@kvkit/contracts/backend';
import type { GpuTensor } from './gpuTensor.js';
import { WebGpuKernels } from './webGpuKernels.js';

/** Where a WebGPU tensor's elements lie, for handing a result to the application's own passes. */
export interface GpuBufferRange {
  readonly buffer: GPUBuffer;
  /** Byte offset of element 0 in `buffer` (kvkit's tensors may be slices of a larger buffer). */
  readonly byteOffset: number;
  /** Bytes of data: numel × element size (2 for f16/bf16, stored as consecutive 16-bit values). */
  readonly byteLength: number;
  /** Per dim, in elements, as PyTorch counts them. */
  readonly strides: readonly number[];
}

/** Stands in for the owner a non-WebGPU tensor is compared with, so the check names what was expected. */
const ANY_WEBGPU_BACKEND = { label: 'a WebGPU backend' };

/**
 * The device buffer behind a live tensor of a WebGPU backend. The buffer stays
 * kvkit's: use it only while the tensor lives, and call `backend.flush()`
 * before submitting work that reads it. Not a tensor: KV001; another
 * backend's: KV002; disposed: KV003 (a layer view past its callback: KV027).
 */
export function gpuBufferOf(tensor: Tensor): GpuBufferRange {
  const owner = isTensor(tensor) ? tensor[TENSOR_OWNER] : undefined;
  const webGpu = owner instanceof WebGpuKernels ? owner : undefined;
  const t = validateTensorUse({ owner: webGpu ?? ANY_WEBGPU_BACKEND, label: webGpu?.label ?? ANY_WEBGPU_BACKEND.label }, 'gpuBufferOf', tensor) as GpuTensor;
  const strides = t.shape.map(() => 1);
  for (let d = t.shape.length - 2; d >= 0; d--) strides[d] = strides[d + 1]! * t.shape[d + 1]!;
  return { buffer: t.storage.buffer, byteOffset: t.byteOffset, byteLength: t.byteLength, strides };
}
