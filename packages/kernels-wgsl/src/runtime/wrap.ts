import type { Backend, DType, Shape, Tensor } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { describeValue, validateWrapLayout } from '@kvkit/contracts/backend';
import type { WebGpuKernels } from './webGpuKernels.js';

/** Where a wrapped tensor lies in the application's buffer: `byteOffset` any multiple of the element size, strides in elements. */
export interface WrapOptions {
  /** Where the tensor's element 0 lies in the buffer, in bytes: any multiple of the element size (default 0). */
  readonly byteOffset?: number;
  /** Elements between neighbours along each dim; row-major for the shape when omitted. */
  readonly strides?: readonly number[];
}

/** The WebGPU backend: the common API, and tensors over the application's own buffers. */
export interface WebGpuBackend extends Backend {
  /**
   * A tensor over `buffer`, which stays the application's (kvkit never destroys it): f16/bf16 as consecutive
   * 16-bit values, `strides` in elements (row-major when omitted). The buffer needs GPUBufferUsage.STORAGE, and
   * COPY_SRC to be read. A call that reads or writes it submits its work before returning, so the application's next
   * `queue.submit` runs after it (with `batching: 'explicit'`, call `flush()` before the application's submits).
   */
  wrap<const DT extends DType, const S extends Shape>(buffer: GPUBuffer, dtype: DT, shape: S, options?: WrapOptions): Tensor<DT, S>;
}

const OP = 'wrap';
/** GPUBufferUsage.STORAGE. */
const USAGE_STORAGE = 0x80;

function looksLikeBuffer(value: unknown): value is GPUBuffer {
  const b = value as Partial<GPUBuffer> | null;
  return typeof b === 'object' && b !== null && typeof b.size === 'number' && typeof b.usage === 'number' && typeof b.getMappedRange === 'function';
}

/** `backend.wrap`: the application's buffer checked (KV044, KV049), then the view in it (KV004, KV040, KV046, KV047). */
export function wrapFor(kernels: WebGpuKernels, isDisposed: () => boolean): WebGpuBackend['wrap'] {
  const ctx = { owner: kernels, label: kernels.label, tensorLimit: kernels.tensorLimit.bind(kernels), isDisposed };
  function wrap<const DT extends DType, const S extends Shape>(buffer: GPUBuffer, dtype: DT, shape: S, options?: WrapOptions): Tensor<DT, S>;
  function wrap(buffer: unknown, dtype: unknown, shape: unknown, options?: unknown): Tensor {
    if (isDisposed()) throw new ContractError('KV003', OP, { arg: 'this backend' });
    kernels.assertLive(OP);
    if (!looksLikeBuffer(buffer)) throw new ContractError('KV044', OP, { arg: 'buffer', expected: "a GPUBuffer of this backend's device", actual: describeValue(buffer) });
    if ((buffer.usage & USAGE_STORAGE) === 0) {
      throw new ContractError('KV049', OP, { arg: 'buffer', reason: `its usage (${buffer.usage}) lacks GPUBufferUsage.STORAGE, which kernels bind it with` });
    }
    const v = validateWrapLayout(ctx, OP, dtype, shape, options, buffer.size);
    return kernels.wrap(buffer, v.dtype, v.shape, v.layout);
  }
  return wrap;
}
