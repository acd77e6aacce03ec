import type { Tensor } from '@kvkit/contracts';
import { isTensor, TENSOR_OWNER, validateTensorUse } from '@kvkit/contracts/backend';
import type { GpuTensor } from './gpuTensor.js';
import { allKernels } from './registry.js';
import type { WebGpuKernels } from './webGpuKernels.js';

/** Where a WebGPU tensor's elements lie, for handing a result to the application's own passes. */
export interface GpuBufferRange {
  /** The backend's buffer holding the tensor; valid while the tensor lives, never the application's to destroy. */
  readonly buffer: GPUBuffer;
  /** Byte offset of element 0 in `buffer` (kvkit's tensors may be slices of a larger buffer). */
  readonly byteOffset: number;
  /** Bytes from element 0 to the end of the last element: numel × element size for a contiguous tensor (2 for f16/bf16, stored as consecutive 16-bit values). */
  readonly byteLength: number;
  /** Per dim, in elements, as PyTorch counts them. */
  readonly strides: readonly number[];
}

/** Stands in for the owner a non-WebGPU tensor is compared with, so the check names what was expected. */
const ANY_WEBGPU_BACKEND = { label: 'a WebGPU backend' };

/**
 * The device buffer behind a live tensor of a WebGPU backend. The buffer stays
 * kvkit's: use it only while the tensor lives. Work pending on it is submitted
 * here, and later calls that touch it submit before they return, as for a
 * wrapped buffer (with `batching: 'explicit'`, call `backend.flush()` before
 * submitting work that uses it). Not a tensor: KV001; another backend's:
 * KV002; disposed: KV003 (a layer view past its callback: KV027).
 */
export function gpuBufferOf(tensor: Tensor): GpuBufferRange {
  const owner = isTensor(tensor) ? tensor[TENSOR_OWNER] : undefined;
  const webGpu = owner !== undefined && allKernels.has(owner) ? (owner as WebGpuKernels) : undefined;
  const t = validateTensorUse({ owner: webGpu ?? ANY_WEBGPU_BACKEND, label: webGpu?.label ?? ANY_WEBGPU_BACKEND.label }, 'gpuBufferOf', tensor) as GpuTensor;
  // A strided view's bytes run from its first element to one past its last.
  const last = t.shape.reduce((end, d, i) => end + Math.max(0, d - 1) * t.strides[i]!, 0);
  const byteLength = t.numel === 0 ? 0 : (last + 1) * (t.byteLength / t.numel);
  webGpu!.runtime.share(t.storage.buffer);
  return { buffer: t.storage.buffer, byteOffset: t.byteOffset, byteLength, strides: t.strides };
}
