/** The kernel that reads a strided view into contiguous storage, or writes contiguous data into a view with an offset. */
import { read, readWrite, u32, wgslKernel } from './declare.js';
import type { UniformField } from './declare.js';

/** Dims a strided copy walks (after merging the dims a view keeps contiguous): ops take at most 4, i64 adds one. */
export const STRIDED_COPY_DIMS = 8;

const dimFields: Record<string, UniformField> = {};
for (let d = 0; d < STRIDED_COPY_DIMS; d++) {
  dimFields[`size${d}`] = u32(`elements along dim ${d} (1 past the view's rank)`);
  dimFields[`stride${d}`] = u32(`source stride of dim ${d}, in elements`);
}

export const stridedCopyWgsl = wgslKernel({
  kernel: 'stridedCopy',
  doc: 'dst[dstOffset + i] = src[srcOffset + Σ index_d(i)·stride_d], one invocation per destination word (stridedCopy.wgsl.ts).',
  uniforms: {
    words: u32('destination words written'),
    firstWord: u32('the first of them'),
    count: u32('elements copied'),
    srcOffset: u32('element offset of the view in the source binding'),
    dstOffset: u32('element offset of the first element in the destination binding'),
    ...dimFields,
  },
  bindings: {
    src: read('u32', 'the viewed storage, 32-bit elements or two 16-bit ones per word'),
    dst: readWrite('u32', 'contiguous destination; halves outside the copy keep their bits'),
  },
});
