import { contiguousStrides, layoutOf, storageBytes, viewExtent } from '../backend/viewLayout.js';
import type { ViewLayout } from '../backend/viewLayout.js';
import { DTYPES, FLOAT_DTYPES } from '../tensor.js';
import type { DType, OwnedTensor, Shape } from '../tensor.js';
import { Call, describeValue } from './call.js';
import type { ValidationContext } from './call.js';
import { validateTensorCreation, validateShape } from './tensors.js';

/** A validated view: its base, and its layout in the base's storage (absolute: the base's offset already added). */
export interface CheckedView {
  readonly base: OwnedTensor;
  readonly shape: Shape;
  readonly layout: ViewLayout;
}

/** The checks of `backend.view(base, shape, { strides, offset })`: strides and offset in elements, relative to the base's element 0. */
export function validateView(ctx: ValidationContext, base: unknown, shape: unknown, options: unknown, extra = 0): CheckedView {
  const call = new Call('view', ctx);
  const t = call.tensor('base', base, { oneOf: DTYPES })!;
  const dims = validateShape(call, t.dtype, shape);
  const a = call.args(options, ['strides', 'offset'], 'KV043', extra);
  const relative = a.offset === undefined ? 0 : nonNegative(call, 'offset', a.offset);
  const strides = a.strides === undefined ? contiguousStrides(dims) : stridesOf(call, a.strides, dims);
  const root = layoutOf(t);
  const layout = { offset: root.offset + relative, strides };
  withinStorage(call, 'view', t.dtype, dims, layout, root.capacity);
  return { base: t, shape: dims, layout };
}

/**
 * The checks of a backend's wrap of memory the application owns, `{ byteOffset?, strides? }`:
 * a tensor of `dtype` and `shape` over `capacityBytes` bytes. Returns the layout in elements.
 */
export function validateWrapLayout(ctx: ValidationContext, op: string, dtype: unknown, shape: unknown, options: unknown, capacityBytes: number): { dtype: DType; shape: Shape; layout: ViewLayout } {
  const v = validateTensorCreation(ctx, op, dtype, shape);
  const call = new Call(op, ctx);
  const a = call.args(options, ['byteOffset', 'strides'], 'KV043');
  const size = storageBytes(v.dtype);
  const byteOffset = a.byteOffset === undefined ? 0 : nonNegative(call, 'byteOffset', a.byteOffset);
  if (byteOffset % size !== 0) call.fail('KV046', { arg: 'byteOffset', reason: `it must be a multiple of the ${v.dtype} element size, ${size} bytes`, actual: byteOffset });
  const strides = a.strides === undefined ? contiguousStrides(v.shape) : stridesOf(call, a.strides, v.shape);
  const layout = { offset: byteOffset / size, strides };
  withinStorage(call, 'the wrapped tensor', v.dtype, v.shape, layout, Math.floor(capacityBytes / size));
  return { ...v, layout };
}

/** The shape of a fused projection `splitQkv` accepts, and the element offsets of its K and V heads. */
export interface CheckedSplit {
  readonly qkv: OwnedTensor;
  readonly dims: { readonly N: number; readonly Hq: number; readonly H: number; readonly D: number };
  /** Layouts of q `[N, Hq, D]`, k and v `[N, H, D]`, absolute in the storage of qkv. */
  readonly q: ViewLayout;
  readonly k: ViewLayout;
  readonly v: ViewLayout;
}

/** The checks of `splitQkv(qkv, { numQoHeads, numKvHeads, headDim })`, and the three views' layouts. */
export function validateSplitQkv(ctx: ValidationContext, qkv: unknown, options: unknown, extra = 0): CheckedSplit {
  const call = new Call('splitQkv', ctx);
  const t = call.tensor('qkv', qkv, { oneOf: FLOAT_DTYPES })!;
  const a = call.args(options, ['numQoHeads', 'numKvHeads', 'headDim'], 'KV043', extra);
  const Hq = call.int('numQoHeads', a.numQoHeads, 'KV006', { binds: 'Hq' })!;
  const H = call.int('numKvHeads', a.numKvHeads, 'KV006', { binds: 'H' })!;
  const D = call.int('headDim', a.headDim, 'KV006', { binds: 'D' })!;
  const heads = Hq + 2 * H;
  const [N, ...rest] = t.shape;
  const flat = rest.length === 1 && rest[0] === heads * D;
  const split = rest.length === 2 && rest[0] === heads && rest[1] === D;
  if (N === undefined || !(flat || split)) {
    call.fail('KV029', { arg: 'qkv', actual: t.shape, expected: `[N, (Hq + 2H)·D] = [${N ?? 'N'}, ${heads * D}] or [N, Hq + 2H, D] = [${N ?? 'N'}, ${heads}, ${D}]` });
  }
  call.dims.N = N!;
  const root = layoutOf(t);
  // Token stride, head stride and element stride, as the fused tensor lays them out.
  const [sn, sh, se] = flat ? [root.strides[0]!, D * root.strides[1]!, root.strides[1]!] : [root.strides[0]!, root.strides[1]!, root.strides[2]!];
  const at = (head: number): ViewLayout => ({ offset: root.offset + head * sh, strides: [sn, sh, se] });
  return { qkv: t, dims: { N: N!, Hq, H, D }, q: at(0), k: at(Hq), v: at(Hq + H) };
}

function nonNegative(call: Call, arg: string, value: unknown): number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) call.fail('KV046', { arg, reason: 'it must be a non-negative integer', actual: describeValue(value) });
  return value as number;
}

function stridesOf(call: Call, value: unknown, shape: Shape): number[] {
  if (!Array.isArray(value)) call.fail('KV046', { arg: 'strides', reason: `it must be an array of ${shape.length} strides, one per dim`, actual: describeValue(value) });
  const list = Array.from(value as unknown[]);
  if (list.length !== shape.length) call.fail('KV046', { arg: 'strides', reason: `a shape of rank ${shape.length} takes ${shape.length} strides`, actual: `${list.length} strides for shape [${shape.join(', ')}]` });
  const bad = list.findIndex((s) => typeof s !== 'number' || !Number.isSafeInteger(s) || s < 0);
  if (bad >= 0) call.fail('KV046', { arg: `strides[${bad}]`, reason: 'every stride must be a non-negative integer, in elements', actual: describeValue(list[bad]) });
  return list as number[];
}

function withinStorage(call: Call, arg: string, dtype: DType, shape: Shape, layout: ViewLayout, capacity: number): void {
  const end = viewExtent(shape, layout);
  if (end > capacity) call.fail('KV047', { arg, actual: end - 1, expected: capacity, dtype });
}
