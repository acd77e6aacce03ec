import { ContractError } from '@kvkit/contracts';
import type { Backend, DType, Shape, Tensor } from '@kvkit/contracts';
import { describeValue, validateTensorCreation, validateWrapLayout } from '@kvkit/contracts/backend';
import type { ValidationContext } from '@kvkit/contracts/backend';
import { CudaTensor, ELEMENT_BYTES } from './cudaTensor.js';
import type { CudaKernels } from './cudaKernels.js';
import { MEMORY_TYPE, POINTER_ATTRIBUTE } from './driver.js';
import { DeviceBuffer } from './memory.js';
import { findCudaKernels } from './registry.js';

const OP = 'wrapDeviceMemory';

/** A device address as the application holds it (`CUdeviceptr`): a bigint, or a number where its bindings give numbers. */
export type DevicePointer = bigint | number;

/** How the wrapped elements lie from `ptr`: strides in elements, as PyTorch counts them (row-major when omitted). */
export interface WrapOptions {
  readonly strides?: readonly number[];
}

/**
 * A tensor over device memory the application owns, element 0 at `ptr` and
 * the rest at `strides` (row-major when omitted; any non-negative strides,
 * e.g. PyTorch's `tensor.stride()` of a slice of a fused projection): kvkit
 * reads it in place (ops gather what their kernels do not read strided), writes
 * it in place where it is contiguous, and its `dispose()` never frees it. The
 * application keeps the memory alive until kvkit's work on it has finished
 * (a `sync()`, or an event on `streamOf(backend)`). Checked before it is
 * made: the dtype and shape as `tensor()` checks them; through the driver,
 * that `ptr` is device memory of this backend's device and context, aligned
 * to the dtype (KV044); the strides (KV046); and that every element lies
 * inside `ptr`'s allocation (KV047).
 */
export function wrapDeviceMemory<const DT extends DType, const S extends Shape>(backend: Backend, ptr: DevicePointer, dtype: DT, shape: S, options?: WrapOptions): Tensor<DT, S>;
export function wrapDeviceMemory(backend: unknown, ptr: unknown, dtype: unknown, shape: unknown, options?: unknown): Tensor {
  const kernels = findCudaKernels(backend);
  if (!kernels) throw new ContractError('KV044', OP, { arg: 'backend', expected: 'a backend made by createCudaBackend()', actual: describeValue(backend) });
  const ctx = validationOf(kernels);
  const given = validateTensorCreation(ctx, OP, dtype, shape);
  const range = checkedAddress(kernels, ptr, given.dtype);
  const v = validateWrapLayout(ctx, OP, given.dtype, given.shape, options, range.end - range.address);
  const es = ELEMENT_BYTES[v.dtype];
  // Offsets count from the allocation's start, so wraps of one allocation overlap exactly where their elements do.
  const start = (range.address - range.start) % es === 0 ? range.start : range.address;
  const storage = new DeviceBuffer(start, range.end - start, () => {});
  const offset = (range.address - start) / es + v.layout.offset;
  return new CudaTensor(kernels, v.dtype, v.shape, storage, { root: kernels.applicationStorage(start), offset, strides: v.layout.strides, capacity: Math.floor((range.end - start) / es) });
}

function validationOf(kernels: CudaKernels): ValidationContext {
  return { owner: kernels, label: kernels.label, tensorLimit: (d) => kernels.tensorLimit(d), isDisposed: () => kernels.disposed };
}

const hex = (n: number | bigint) => `0x${n.toString(16)}`;

/** The address as a number (device addresses are below 2^53), once the driver vouches for it, and the bounds of its allocation. */
function checkedAddress(kernels: CudaKernels, ptr: unknown, dtype: DType): { address: number; start: number; end: number } {
  const wrong = (expected: string, actual: string): never => {
    throw new ContractError('KV044', OP, { arg: 'ptr', expected, actual });
  };
  const integral = (typeof ptr === 'bigint' && ptr > 0n && ptr <= BigInt(Number.MAX_SAFE_INTEGER)) || (typeof ptr === 'number' && Number.isSafeInteger(ptr) && ptr > 0);
  if (!integral) wrong('a device address (CUdeviceptr): a non-zero bigint or number', describeValue(ptr));
  const address = Number(ptr as DevicePointer);
  const align = ELEMENT_BYTES[dtype];
  if (address % align !== 0) wrong(`aligned to ${align} bytes for ${dtype}`, `${hex(address)}`);
  const { cx } = kernels;
  const device = kernels.device.ordinal;
  cx.makeCurrent();
  const cu = cx.cu;
  const word = Buffer.alloc(8);
  const attribute = (id: number): bigint | string => {
    word.fill(0);
    const status = cu.cuPointerGetAttribute(word, id, address);
    return status === 0 ? word.readBigUInt64LE(0) : cu.errorName(status);
  };
  const memoryType = attribute(POINTER_ATTRIBUTE.memoryType);
  if (typeof memoryType === 'string') wrong('device memory the CUDA driver knows', `${hex(address)}, which the driver does not (${memoryType})`);
  const type = Number(BigInt.asUintN(32, memoryType as bigint));
  if (type !== MEMORY_TYPE.device && type !== MEMORY_TYPE.unified) wrong('device memory', `${hex(address)}, ${type === MEMORY_TYPE.host ? 'page-locked host memory' : `memory of type ${type}`}`);
  const ordinal = attribute(POINTER_ATTRIBUTE.deviceOrdinal);
  if (typeof ordinal === 'bigint' && Number(BigInt.asIntN(32, ordinal)) !== device) wrong(`memory of device ${device}, this backend's`, `${hex(address)} on device ${Number(BigInt.asIntN(32, ordinal))}`);
  // Pool and virtual-memory allocations belong to no context (the driver answers 0 or an error): only a named other one is refused.
  const context = attribute(POINTER_ATTRIBUTE.context);
  if (typeof context === 'bigint' && context !== 0n && context !== cx.context) wrong("memory of this backend's CUDA context", `${hex(address)}, memory of another context`);
  const start = attribute(POINTER_ATTRIBUTE.rangeStart);
  const size = attribute(POINTER_ATTRIBUTE.rangeSize);
  if (typeof start === 'string' || typeof size === 'string') return wrong('device memory whose allocation the driver can bound', `${hex(address)} (${typeof start === 'string' ? start : size})`);
  return { address, start: Number(start), end: Number((start as bigint) + (size as bigint)) };
}
