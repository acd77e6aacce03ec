import { DTYPES, numel } from '../tensor.js';
import type { DType, OwnedTensor, Shape, TensorData } from '../tensor.js';
import { TYPED_ARRAY_MAX_LENGTH } from '../backend/hostReads.js';
import { Call, describeValue } from './call.js';
import type { ValidationContext } from './call.js';

const I32_MIN = -(2 ** 31);
const I32_MAX = 2 ** 31 - 1;

/** The most elements one tensor of a dtype holds on a backend, and what sets that bound (KV045 names both). */
export interface TensorLimit {
  readonly elements: number;
  /** e.g. `the device binds at most 134217728 bytes (maxStorageBufferBindingSize)`. */
  readonly reason: string;
}

/** For a backend that states no limit of its own: kernels that index elements with 32-bit signed integers. */
export const INDEX32_LIMIT: TensorLimit = { elements: I32_MAX, reason: 'elements are indexed with 32-bit signed integers' };

/** The checks of `tensor(dtype, shape, data?)` and `empty(dtype, shape)` (and a backend's wrap of memory it does not own): the tensor contract in `ops/common.ts`. */
export function validateTensorCreation(ctx: ValidationContext, op: string, dtype: unknown, shape: unknown, data?: unknown): { dtype: DType; shape: Shape } {
  const call = new Call(op, ctx);
  const v = validateDtypeAndShape(call, dtype, shape);
  if (data !== undefined) validateTensorData(call, v.dtype, v.shape, data);
  return v;
}

type BitsArray = Uint8Array | Uint16Array | Uint32Array | Float32Array | Int32Array | BigInt64Array;

/** The typed arrays `tensorFromBits` takes per dtype: the layout the bits are stored in (f32 bits in a Float32Array too). */
const BITS_ARRAYS: Readonly<Record<DType, readonly (new (length: number) => BitsArray)[]>> = {
  f32: [Uint32Array, Float32Array],
  f16: [Uint16Array],
  bf16: [Uint16Array],
  i32: [Int32Array],
  i64: [BigInt64Array],
  fp8e4m3: [Uint8Array],
  fp8e5m2: [Uint8Array],
};

/**
 * The checks of `tensorFromBits(dtype, shape, bits)`: those of `tensor()`, then
 * the bits' array type (another one would be misread: a Float32Array of values
 * given as f16 bits) and length. Returns the bits as bytes, ready to copy.
 */
export function validateTensorBits(ctx: ValidationContext, dtype: unknown, shape: unknown, bits: unknown): { dtype: DType; shape: Shape; bytes: Uint8Array } {
  const call = new Call('tensorFromBits', ctx);
  const v = validateDtypeAndShape(call, dtype, shape);
  const kinds = BITS_ARRAYS[v.dtype];
  if (!kinds.some((k) => bits instanceof k)) {
    call.fail('KV044', { arg: 'bits', expected: `a ${kinds.map((k) => k.name).join(' or ')} (the ${v.dtype} bits as stored)`, actual: describeValue(bits) });
  }
  const view = bits as BitsArray;
  const n = numel(v.shape);
  if (view.length !== n) call.fail('KV041', { actual: view.length, shape: v.shape, expected: n });
  return { ...v, bytes: new Uint8Array(view.buffer, view.byteOffset, view.byteLength) };
}

function validateDtypeAndShape(call: Call, dtype: unknown, shape: unknown): { dtype: DType; shape: Shape } {
  if (typeof dtype !== 'string' || !DTYPES.includes(dtype as DType)) call.fail('KV004', { arg: 'dtype', actual: describeValue(dtype), expected: DTYPES.join(', ') });
  return { dtype: dtype as DType, shape: validateShape(call, dtype as DType, shape) };
}

/** A shape of non-negative integer dims (KV040) that the backend holds in one tensor of `dtype` (KV045); frozen. */
export function validateShape(call: Call, dtype: DType, shape: unknown): Shape {
  const ctx = call.ctx;
  // Array.from turns holes into undefined, which the check then rejects.
  const dims = Array.isArray(shape) ? Object.freeze(Array.from(shape as unknown[])) : undefined;
  if (!dims?.every((d) => typeof d === 'number' && Number.isSafeInteger(d) && d >= 0)) {
    call.fail('KV040', { actual: dims ? `[${dims.map((d) => (typeof d === 'number' ? d : describeValue(d))).join(', ')}]` : describeValue(shape) });
  }
  const count = numel(dims as Shape);
  const limit = ctx.tensorLimit?.(dtype as DType) ?? INDEX32_LIMIT;
  if (count > limit.elements) call.fail('KV045', { dtype, actual: dims, count, backend: ctx.label, expected: limit.elements, reason: limit.reason });
  return dims as Shape;
}

function validateTensorData(call: Call, dtype: DType, dims: Shape, data: unknown): void {
  const isList = Array.isArray(data) || ArrayBuffer.isView(data);
  if (!isList || data instanceof DataView) call.fail('KV001', { arg: 'data', actual: describeValue(data) });
  const list = data as TensorData;
  const n = numel(dims);
  if (list.length !== n) call.fail('KV041', { actual: list.length, shape: dims, expected: n });
  const bad = firstUnrepresentable(dtype, list);
  if (bad !== undefined) call.fail('KV042', { index: bad, actual: describeValue(list[bad]), expected: dtype });
}

/** `read(t)` and `readBits(t)` take only live tensors of their own backend. */
export function validateTensorUse(ctx: ValidationContext, op: string, t: unknown): OwnedTensor {
  return new Call(op, ctx).tensor('tensor', t, { oneOf: DTYPES })!;
}

/** The checks of `read(t)` and `readBits(t)`: `validateTensorUse`, then a result one typed array holds (KV045). */
export function validateTensorRead(ctx: ValidationContext, op: 'read' | 'readBits', t: unknown): OwnedTensor {
  const call = new Call(op, ctx);
  const own = call.tensor('tensor', t, { oneOf: DTYPES })!;
  const count = numel(own.shape);
  // A GPU backend may hold more elements than the host can take back in one array.
  if (count > TYPED_ARRAY_MAX_LENGTH) {
    const reason = `${op}() returns one JavaScript typed array; read views of the tensor (backend.view) of at most that many elements each`;
    call.fail('KV045', { dtype: own.dtype, actual: own.shape, count, backend: 'the host', expected: TYPED_ARRAY_MAX_LENGTH, reason });
  }
  return own;
}

const I64_MIN = -(2n ** 63n);
const I64_MAX = 2n ** 63n - 1n;

/** Typed arrays whose every element is representable in the dtype: nothing to look at element by element. */
function alwaysRepresentable(dtype: DType, data: TensorData): boolean {
  // An allow-list: any other view (a BigUint64Array, say) is looked at element by element.
  const smallInts = data instanceof Int32Array || data instanceof Int16Array || data instanceof Uint16Array || data instanceof Int8Array || data instanceof Uint8Array;
  if (dtype === 'i32') return smallInts;
  if (dtype === 'i64') return smallInts || data instanceof BigInt64Array || data instanceof Uint32Array;
  return smallInts || data instanceof Uint32Array || data instanceof Float32Array || data instanceof Float64Array;
}

function firstUnrepresentable(dtype: DType, data: TensorData): number | undefined {
  if (alwaysRepresentable(dtype, data)) return undefined;
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (dtype === 'i64') {
      if (typeof v === 'bigint') {
        if (v < I64_MIN || v > I64_MAX) return i;
      } else if (!Number.isSafeInteger(v)) return i;
    } else if (dtype === 'i32') {
      const n = typeof v === 'bigint' ? Number(v) : v;
      if (!Number.isInteger(n) || n < I32_MIN || n > I32_MAX) return i;
    } else if (typeof v !== 'number') return i;
  }
  return undefined;
}
