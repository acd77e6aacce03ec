/** The materializer's projection: C[M, N] = A[M, K] · B[N, K]^T. */
import { cudaKernel, entryGrid, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';

export const gemmCuda = cudaKernel({
  kernel: 'gemm',
  struct: 'GemmParams',
  doc: 'C[M, N] = A[M, K] · B[N, K]^T, all row-major, f32 accumulation; blockIdx.z picks one of a batch of B and C (A shared) (gemm.cu).',
  params: {
    a: input('void', '[M, K]'),
    b: input('void', '[N, K], batchStrideB elements apart'),
    c: output('void', '[M, N], batchStrideC elements apart'),
    m: i64('M'),
    n: i64('N'),
    k: i64('K'),
    batchStrideB: i64('elements between the Bs of a batch'),
    batchStrideC: i64('elements between the Cs of a batch'),
  },
  launches: {
    // blockM × blockN: the tile of C one block computes (the host's grid divides M and N by them); blockK: K per step.
    tensorcore: { threads: 256, constants: { blockM: 128, blockN: 128, blockK: 32 }, doc: 'tiles on the tensor cores (wmma)' },
    simt: { threads: 256, constants: { blockM: 64, blockN: 64, blockK: 16 }, doc: 'tiles of f32 FMAs' },
  },
  entries: [...entryGrid('gemm_tensorcore_{dtype}', ['f16', 'bf16'], ['tensorcore']), ...entryGrid('gemm_simt_{dtype}', ['f32'], ['simt'])],
});

export const gemmWgsl = wgslKernel({
  kernel: 'gemm',
  doc: 'C[M, N] = A[M, K] · W[N, K]^T, tiled, optionally split over K into f32 partial sums (projectionGemm.wgsl.ts).',
  uniforms: {
    rows: u32('M'),
    cols: u32('N'),
    depth: u32('K'),
    tilesN: u32('tiles across N'),
    tiles: u32('tiles of C; workgroup w takes tile w % tiles'),
    kPerSplit: u32('K range of one split: [s·kPerSplit, (s+1)·kPerSplit) for s = w / tiles'),
  },
  types: { Operand: 'vec4<u32> where rows are 16-byte aligned, else u32' },
  bindings: {
    a: read('Operand', '[M, K]'),
    w: read('Operand', '[N, K]'),
    c: readWrite('u32', '[M, N] in the dtype, or [splits, M, N] f32 partial sums'),
  },
});

export const gemmReduceWgsl = wgslKernel({
  kernel: 'gemmReduce',
  doc: 'Sums the f32 partial slabs of a split-K GEMM and rounds each result once into C (projectionGemm.wgsl.ts).',
  uniforms: {
    words: u32('u32 words of C'),
    elements: u32('M*N, elements of one slab'),
    splits: u32('slabs'),
  },
  bindings: {
    partial: read('f32', '[splits, M, N]'),
    c: readWrite('u32', '[M, N] in the dtype'),
  },
});
