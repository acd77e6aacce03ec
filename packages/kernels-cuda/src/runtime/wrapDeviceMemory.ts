import { ContractError, numel } from '@kvkit/contracts';
import type { Backend, DType, Shape, Tensor } from '@kvkit/contracts';
import { describeValue, validateTensorCreation } from '@kvkit/contracts/backend';
import type { ValidationContext } from '@kvkit/contracts/backend';
import { CudaTensor, ELEMENT_BYTES } from './cudaTensor.js';
import type { CudaKernels } from './cudaKernels.js';
import { MEMORY_TYPE, POINTER_ATTRIBUTE } from './driver.js';
import { DeviceBuffer } from './memory.js';
import { findCudaKernels } from './registry.js';

const OP = 'wrapDeviceMemory';

/** A device address as the application holds it (`CUdeviceptr`): a bigint, or a number where its bindings give numbers. */
export type DevicePointer = bigint | number;

/**
 * A tensor over device memory the application owns, contiguous from `ptr`:
 * kvkit reads and writes it in place and its `dispose()` never frees it. The
 * application keeps the memory alive until kvkit's work on it has finished
 * (a `sync()`, or an event on `streamOf(backend)`). Checked before it is
 * made: the dtype and shape as `tensor()` checks them, then, through the
 * driver, that `ptr` is device memory of this backend's device and context,
 * aligned to the dtype, with the whole shape inside its allocation (KV044).
 */
export function wrapDeviceMemory<const DT extends DType, const S extends Shape>(backend: Backend, ptr: DevicePointer, dtype: DT, shape: S): Tensor<DT, S>;
export function wrapDeviceMemory(backend: unknown, ptr: unknown, dtype: unknown, shape: unknown): Tensor {
  const kernels = findCudaKernels(backend);
  if (!kernels) throw new ContractError('KV044', OP, { arg: 'backend', expected: 'a backend made by createCudaBackend()', actual: describeValue(backend) });
  const v = validateTensorCreation(validationOf(kernels), OP, dtype, shape);
  const bytes = numel(v.shape) * ELEMENT_BYTES[v.dtype];
  const address = checkedAddress(kernels, ptr, v.dtype, bytes);
  return new CudaTensor(kernels, v.dtype, v.shape, new DeviceBuffer(address, bytes, () => {}));
}

function validationOf(kernels: CudaKernels): ValidationContext {
  return { owner: kernels, label: kernels.label, tensorLimit: (d) => kernels.tensorLimit(d), isDisposed: () => kernels.disposed };
}

const hex = (n: number | bigint) => `0x${n.toString(16)}`;

/** The address as a number (device addresses are below 2^53), once the driver vouches for `bytes` of device memory from it. */
function checkedAddress(kernels: CudaKernels, ptr: unknown, dtype: DType, bytes: number): number {
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
  const left = Number(start + size) - address;
  if (bytes > left) wrong(`the start of ${bytes} bytes of one allocation (the shape's ${dtype} elements)`, `${hex(address)}, ${left} bytes before its allocation ends`);
  return address;
}
