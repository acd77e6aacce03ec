import { numel, TENSOR_LAYOUT } from '../tensor.js';
import type { DType, OwnedTensor, Shape, StorageLayout } from '../tensor.js';

/** Offset and strides of a view, in elements of its storage. */
export interface ViewLayout {
  readonly offset: number;
  readonly strides: readonly number[];
}

/** Bytes one element takes in storage on every backend (fp8 as bytes, f16/bf16 as consecutive 16-bit values, i64 as 8 bytes). */
export function storageBytes(dtype: DType): number {
  return dtype === 'fp8e4m3' || dtype === 'fp8e5m2' ? 1 : dtype === 'f16' || dtype === 'bf16' ? 2 : dtype === 'i64' ? 8 : 4;
}

/** Row-major strides of a shape: what every tensor kvkit allocates has. */
export function contiguousStrides(shape: Shape): number[] {
  const strides = shape.map(() => 1);
  for (let d = shape.length - 2; d >= 0; d--) strides[d] = strides[d + 1]! * shape[d + 1]!;
  return strides;
}

/** True when the elements are row-major without gaps (a dim of size 1 may have any stride; an empty tensor is contiguous). */
export function isContiguous(shape: Shape, strides: readonly number[]): boolean {
  if (numel(shape) === 0) return true;
  let expected = 1;
  for (let d = shape.length - 1; d >= 0; d--) {
    if (shape[d] !== 1 && strides[d] !== expected) return false;
    expected *= shape[d]!;
  }
  return true;
}

/** One past the last storage element a view touches (its offset when it has no elements). */
export function viewExtent(shape: Shape, layout: ViewLayout): number {
  if (numel(shape) === 0) return layout.offset;
  return shape.reduce((end, d, i) => end + (d - 1) * layout.strides[i]!, layout.offset + 1);
}

/** The layout of any validated tensor: its own, or contiguous over storage of its own. */
export function layoutOf(t: OwnedTensor): StorageLayout {
  return t[TENSOR_LAYOUT] ?? { root: t, offset: 0, strides: contiguousStrides(t.shape), capacity: numel(t.shape) };
}

/** The storage offset of each element in row-major order: how a host-side backend reads a view. */
export function storageOffsets(shape: Shape, layout: ViewLayout): Float64Array {
  const index = shape.map(() => 0);
  let at = layout.offset;
  const n = numel(shape);
  const into = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    into[i] = at;
    // Odometer step: the last dim moves fastest.
    for (let d = shape.length - 1; d >= 0; d--) {
      index[d]! += 1;
      at += layout.strides[d]!;
      if (index[d]! < shape[d]!) break;
      at -= shape[d]! * layout.strides[d]!;
      index[d] = 0;
    }
  }
  return into;
}

/**
 * True when two tensors may share a storage element: same storage and
 * overlapping byte spans (compared as spans, so two interleaved views that
 * never touch the same element count as overlapping too).
 */
export function storageOverlaps(a: OwnedTensor, b: OwnedTensor): boolean {
  if (a === b) return true;
  const la = layoutOf(a);
  const lb = layoutOf(b);
  if (la.root !== lb.root || numel(a.shape) === 0 || numel(b.shape) === 0) return false;
  const ea = storageBytes(a.dtype);
  const eb = storageBytes(b.dtype);
  return la.offset * ea < viewExtent(b.shape, lb) * eb && lb.offset * eb < viewExtent(a.shape, la) * ea;
}

/** A view's dims as a strided walk sees them, outermost first. */
export interface WalkDims {
  readonly sizes: readonly number[];
  readonly strides: readonly number[];
}

/**
 * The fewest dims that visit the same elements in the same order: dims of
 * size 1 dropped, and a dim merged into the one outside it where that one
 * steps over it whole (stride = inner stride × inner size). A contiguous view
 * becomes one dim of stride 1, an empty one a single dim of size 0. The
 * backends' strided copies walk these.
 */
export function mergedDims(shape: readonly number[], strides: readonly number[]): WalkDims {
  const sizes: number[] = [];
  const steps: number[] = [];
  for (let d = shape.length - 1; d >= 0; d--) {
    const size = shape[d]!;
    if (size === 0) return { sizes: [0], strides: [1] };
    if (size === 1) continue;
    const last = sizes.length - 1;
    if (last >= 0 && strides[d] === steps[last]! * sizes[last]!) sizes[last]! *= size;
    else {
      sizes.push(size);
      steps.push(strides[d]!);
    }
  }
  return { sizes: sizes.reverse(), strides: steps.reverse() };
}
