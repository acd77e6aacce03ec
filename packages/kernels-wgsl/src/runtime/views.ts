/**
 * Views on WebGPU. Kernels bind whole tensors at 256-byte-aligned offsets, so
 * a view they cannot bind as it is (strided, or starting between alignments)
 * is read through the strided copy into a contiguous buffer first, and a
 * tensor written in place there is written through one and copied back. The
 * ops' fast paths read their inputs' strides themselves (`rowStrides`).
 */
import { isContiguous, layoutOf, mergedDims } from '@kvkit/contracts/backend';
import type { OwnedTensor } from '@kvkit/contracts/backend';
import type { StridedCopyParams } from '../generated/params.js';
import { planStridedCopy } from '../shaders/plan.js';
import { STRIDED_COPY_DIMS, stridedCopyShader } from '../shaders/stridedCopy.wgsl.js';
import type { BufferRange } from './gpuRuntime.js';
import { bytesPerElement, GpuTensor } from './gpuTensor.js';
import type { WebGpuKernels } from './webGpuKernels.js';

const align = (n: number, to: number) => Math.ceil(n / to) * to;

/** The device's binding-offset alignment (256 in WebGPU's defaults). */
function bindAlign(k: WebGpuKernels): number {
  return k.runtime.device.limits.minStorageBufferOffsetAlignment;
}

/** True when a kernel may bind the tensor as it is: contiguous, at an aligned offset, its last word inside the buffer. */
export function bindable(k: WebGpuKernels, t: GpuTensor): boolean {
  const layout = layoutOf(t);
  if (!isContiguous(t.shape, layout.strides)) return false;
  return t.byteOffset % bindAlign(k) === 0 && t.byteOffset + align(t.byteLength, 4) <= t.storage.buffer.size;
}

/** A binding that covers every element of a view, from the aligned offset at or before its first one; `elements` before it. */
export function spanBinding(k: WebGpuKernels, t: GpuTensor): { range: BufferRange; before: number } {
  const eb = bytesPerElement(t.dtype);
  const layout = layoutOf(t);
  const rootByte = t.byteOffset - layout.offset * eb;
  let last = layout.offset;
  t.shape.forEach((d, i) => {
    last += Math.max(0, d - 1) * layout.strides[i]!;
  });
  const start = t.byteOffset - (t.byteOffset % bindAlign(k));
  const end = Math.min(align(rootByte + (last + 1) * eb, 4), t.storage.buffer.size);
  return { range: { buffer: t.storage.buffer, id: t.storage.id, offset: start, size: Math.max(4, end - start) }, before: (t.byteOffset - start) / eb };
}

/**
 * A kernel's view of an input whose head rows are contiguous (`[N, heads, D]`,
 * inner stride 1): where each row starts, in units of `elementsPerUnit`
 * elements; undefined where the strides do not fall on whole units.
 */
export function rowStrides(k: WebGpuKernels, t: OwnedTensor, elementsPerUnit: number): { range: BufferRange; offset: number; tokenStride: number; headStride: number } | undefined {
  const own = k.own(t);
  if (own.shape.length !== 3 || (own.strides[2] !== 1 && own.shape[2]! > 1)) return undefined;
  const { range, before } = spanBinding(k, own);
  const [tokenStride, headStride] = [own.strides[0]!, own.strides[1]!];
  if ([before, tokenStride, headStride].some((n) => n % elementsPerUnit !== 0)) return undefined;
  return { range, offset: before / elementsPerUnit, tokenStride: tokenStride / elementsPerUnit, headStride: headStride / elementsPerUnit };
}

/** Copies the elements of `src` (any view) in row-major order into `dst` from element `dstOffset` of its binding. */
export function copyStrided(k: WebGpuKernels, src: GpuTensor, dst: BufferRange, dstOffset: number): void {
  if (src.numel === 0) return;
  const { range, before } = spanBinding(k, src);
  const layout = layoutOf(src);
  // i64 elements move as two 32-bit words, low first.
  const wide = src.dtype === 'i64';
  const scale = wide ? 2 : 1;
  const dims = mergedDims(wide ? [...src.shape, 2] : src.shape, wide ? [...layout.strides.map((s) => 2 * s), 1] : layout.strides);
  const lanes = wide ? 1 : ((4 / bytesPerElement(src.dtype)) as 1 | 2 | 4);
  copyDims(k, lanes, range, dst, [...dims.sizes], [...dims.strides], before * scale, dstOffset * scale);
}

function copyDims(k: WebGpuKernels, lanes: 1 | 2 | 4, src: BufferRange, dst: BufferRange, sizes: number[], strides: number[], srcOffset: number, dstOffset: number): void {
  if (sizes.length > STRIDED_COPY_DIMS) {
    // More dims than one dispatch walks: one dispatch per index of the outermost.
    const inner = sizes.slice(1).reduce((n, d) => n * d, 1);
    for (let i = 0; i < sizes[0]!; i++) copyDims(k, lanes, src, dst, sizes.slice(1), strides.slice(1), srcOffset + i * strides[0]!, dstOffset + i * inner);
    return;
  }
  const count = sizes.reduce((n, d) => n * d, 1);
  const params: Record<string, number> = { count, srcOffset, dstOffset };
  const pad = STRIDED_COPY_DIMS - sizes.length;
  for (let d = 0; d < STRIDED_COPY_DIMS; d++) {
    params[`size${d}`] = d < pad ? 1 : sizes[d - pad]!;
    params[`stride${d}`] = d < pad ? 0 : strides[d - pad]!;
  }
  const firstWord = Math.floor(dstOffset / lanes);
  const words = Math.ceil((dstOffset + count) / lanes) - firstWord;
  const plan = planStridedCopy(k.runtime.caps, lanes);
  const kernel = k.runtime.kernel(plan, () => stridedCopyShader(plan));
  k.gathers += 1;
  k.runtime.dispatch(kernel, { src, dst }, { ...params, words, firstWord } as unknown as StridedCopyParams, Math.ceil(words / plan.workgroupSize));
}

/** A contiguous copy of any view, made on the device; the caller disposes it once the work that reads it is recorded. */
export function contiguousCopy(k: WebGpuKernels, t: GpuTensor, op: string): GpuTensor {
  const copy = k.allocateOverwritten(t.dtype, t.shape, op);
  copyStrided(k, t, copy.range, 0);
  return copy;
}

/**
 * Runs an op on arguments kernels can bind: inputs that cannot be bound as
 * they are (and that `readsStrided` does not take as they are) are read from
 * contiguous copies; tensors written in place that cannot be bound are
 * written through a copy of their contents and copied back after the op.
 */
export function withBindableViews<A extends object, R>(k: WebGpuKernels, op: string, args: A, written: readonly string[], run: (args: A) => R, readsStrided: (name: string, t: OwnedTensor) => boolean = () => false): R {
  const temporaries: GpuTensor[] = [];
  const writeBacks: [GpuTensor, GpuTensor][] = [];
  const resolved: Record<string, unknown> = { ...(args as Record<string, unknown>) };
  try {
    for (const [name, value] of Object.entries(args as Record<string, unknown>)) {
      if (!(value instanceof GpuTensor) || bindable(k, value)) continue;
      if (!written.includes(name) && readsStrided(name, value)) continue;
      const copy = contiguousCopy(k, value, op);
      temporaries.push(copy);
      resolved[name] = copy;
      if (written.includes(name)) writeBacks.push([copy, value]);
    }
    const result = run(resolved as A);
    for (const [copy, view] of writeBacks) {
      const { range, before } = spanBinding(k, view);
      copyStrided(k, copy, range, before);
    }
    return result;
  } finally {
    for (const t of temporaries) t.dispose();
  }
}
