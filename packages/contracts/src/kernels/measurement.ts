/** Kernels for measuring, not for ops: the copy and FMA ceilings, a stream-holding spin, random fills. */
import { FLOAT_DTYPES } from '../tensor.js';
import { cudaKernel, entryGrid, f64, i64, input, output, readWrite, read, u32, wgslKernel } from './declare.js';

export const copyCuda = cudaKernel({
  kernel: 'copy',
  struct: 'CopyParams',
  doc: 'The bandwidth ceilings: copies of 16-byte vectors, a grid-stride loop and an unrolled one-pass form (profiling.cu).',
  params: {
    src: input('void', 'vectors × 16 bytes'),
    dst: output('void', 'vectors × 16 bytes'),
    vectors: i64('16-byte vectors'),
  },
  launches: {
    default: { threads: 256, doc: 'grid-stride, one vector per step' },
    // All loads of a thread issued before its stores, with streaming hints: the most bytes in flight per thread.
    unrolled: { threads: 256, constants: { vectorsPerThread: 4 }, doc: 'one pass, four vectors per thread' },
  },
  entries: [
    { name: 'copy_vectors', launch: 'default' },
    { name: 'copy_vectors_unrolled', launch: 'unrolled' },
  ],
});

export const spinCuda = cudaKernel({
  kernel: 'spin',
  struct: 'SpinParams',
  doc: 'Holds the stream for a while, so the host can enqueue a batch that then runs back to back (profiling.cu).',
  params: { nanoseconds: i64('how long to hold the stream') },
  launches: { default: { threads: 1, doc: 'one thread' } },
  entries: [{ name: 'spin_stream', launch: 'default' }],
});

export const fillCuda = cudaKernel({
  kernel: 'fill',
  struct: 'FillParams',
  doc: 'Fills a buffer with random values of a dtype (profiling.cu).',
  params: {
    data: output('void', '[count]'),
    count: i64('elements'),
    seed: i64('the same seed gives the same values'),
    scale: f64('values are uniform in [-scale, scale)'),
  },
  launches: { default: { threads: 256 } },
  entries: entryGrid('fill_random_{dtype}', FLOAT_DTYPES, ['default']),
});

export const copyWgsl = wgslKernel({
  kernel: 'copy',
  doc: 'The bandwidth ceiling: each invocation copies a few vec4<u32>, one per stride of all invocations (ceilings.wgsl.ts).',
  uniforms: {
    vectors: u32('vec4<u32> to copy'),
    invocations: u32('invocations of the dispatch'),
  },
  bindings: {
    src: read('vec4<u32>', '[vectors]'),
    dst: readWrite('vec4<u32>', '[vectors]'),
  },
});

export const fmaWgsl = wgslKernel({
  kernel: 'fma',
  doc: 'The compute ceiling: chains of independent f32 FMAs (ceilings.wgsl.ts).',
  uniforms: {
    invocations: u32('invocations that write their sum'),
    seed: u32('operands derive from it, so nothing folds at compile time'),
  },
  bindings: {
    out: readWrite('f32', '[invocations]'),
  },
});
