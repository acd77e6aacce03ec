/** The strided gather: a view's elements into a contiguous buffer, for inputs a kernel does not read through strides. */
import { cudaKernel, i64, input, output } from './declare.js';
import type { CudaParam } from './declare.js';

/** Dims a gathered view may have (after dims of size 1 are dropped and contiguous runs merged). */
export const GATHER_MAX_RANK = 8;

/** `size0`, `stride0`, ... `size7`, `stride7`: one field each, outermost dim first. */
function dimFields(): Record<string, CudaParam> {
  const fields: Record<string, CudaParam> = {};
  for (let d = 0; d < GATHER_MAX_RANK; d++) {
    fields[`size${d}`] = i64(`elements along dim ${d} (1 past the rank)`);
    fields[`stride${d}`] = i64(`elements of src between neighbours along dim ${d}`);
  }
  return fields;
}

export const gatherStridedCuda = cudaKernel({
  kernel: 'gatherStrided',
  struct: 'GatherStridedParams',
  doc: 'Copies the elements of a strided view, row-major, into a contiguous buffer, bit for bit (gather_strided.cu).',
  params: {
    src: input('void', "the view's element 0"),
    dst: output('void', '[count] contiguous'),
    count: i64('elements of the view'),
    rank: i64(`dims that follow, at most ${GATHER_MAX_RANK}`),
    ...dimFields(),
  },
  launches: { default: { threads: 256, doc: 'grid-stride over the elements, 64-bit indices' } },
  // One entry per element width: the copy moves bits, so the dtype matters only through its size.
  entries: [
    { name: 'gather_strided_b8', launch: 'default' },
    { name: 'gather_strided_b16', launch: 'default' },
    { name: 'gather_strided_b32', launch: 'default' },
    { name: 'gather_strided_b64', launch: 'default' },
  ],
});
