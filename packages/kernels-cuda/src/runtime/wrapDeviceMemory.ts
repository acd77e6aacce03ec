import { ContractError } from '@kvkit/contracts';
import koffi from 'koffi';
import type { Backend, DType, Shape, Tensor } from '@kvkit/contracts';
import { describeValue, validateTensorCreation, validateWrapLayout } from '@kvkit/contracts/backend';
import type { ValidationContext } from '@kvkit/contracts/backend';
import { CudaTensor, ELEMENT_BYTES } from './cudaTensor.js';
import type { CudaKernels } from './cudaKernels.js';
import { MEMORY_TYPE, POINTER_ATTRIBUTE } from './driver.js';
import type { CudaDriver } from './driver.js';
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
  const { memoryType, ordinal, context, start, size } = pointerAttributes(cx.cu, address);
  if (memoryType === 0) wrong('device memory the CUDA driver knows', `${hex(address)}, which the driver does not`);
  if (memoryType !== MEMORY_TYPE.device && memoryType !== MEMORY_TYPE.unified) wrong('device memory', `${hex(address)}, ${memoryType === MEMORY_TYPE.host ? 'page-locked host memory' : `memory of type ${memoryType}`}`);
  if (ordinal !== device) wrong(`memory of device ${device}, this backend's`, `${hex(address)} on device ${ordinal}`);
  // Pool and virtual-memory allocations belong to no context (the driver answers null): only a named other one is refused.
  if (context !== 0n && context !== cx.context) wrong("memory of this backend's CUDA context", `${hex(address)}, memory of another context`);
  if (size === 0n) wrong('device memory whose allocation the driver can bound', `${hex(address)}, whose allocation the driver gives no size`);
  return { address, start: Number(start), end: Number(start + size) };
}

/** The attributes read, in the order of their 8-byte slots; each value is zero (null) where the driver knows no such pointer. */
const PROBED = [POINTER_ATTRIBUTE.memoryType, POINTER_ATTRIBUTE.deviceOrdinal, POINTER_ATTRIBUTE.context, POINTER_ATTRIBUTE.rangeStart, POINTER_ATTRIBUTE.rangeSize];
const probeIds = Buffer.from(new Int32Array(PROBED).buffer);
// 256 bytes keep the values off V8's heap, so the addresses handed to the driver stay put.
const probeValues = Buffer.alloc(256);
const probeSlots = Buffer.alloc(8 * PROBED.length);
for (let i = 0; i < PROBED.length; i++) probeSlots.writeBigUInt64LE(BigInt(koffi.address(probeValues)) + BigInt(8 * i), 8 * i);

function pointerAttributes(cu: CudaDriver, address: number): { memoryType: number; ordinal: number; context: bigint; start: bigint; size: bigint } {
  probeValues.fill(0);
  cu.check(OP, 'cuPointerGetAttributes', cu.cuPointerGetAttributes(PROBED.length, probeIds, probeSlots, address));
  return {
    memoryType: probeValues.readUInt32LE(0),
    ordinal: probeValues.readInt32LE(8),
    context: probeValues.readBigUInt64LE(16),
    start: probeValues.readBigUInt64LE(24),
    size: probeValues.readBigUInt64LE(32),
  };
}
