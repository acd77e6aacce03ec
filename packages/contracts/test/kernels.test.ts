import { describe, expect, it } from 'vitest';
import { cudaKernel, read, u32, wgslKernel } from '../src/kernels/declare.js';
import { cudaKernels, FLOAT_CODE, wgslKernels } from '../src/kernels/index.js';
import { FLOAT_DTYPES } from '../src/tensor.js';

describe('kernel interfaces', () => {
  it('name every CUDA entry point, parameter struct and kernel once', () => {
    const entries = cudaKernels.flatMap((k) => k.entries.map((e) => e.name));
    expect(new Set(entries).size).toBe(entries.length);
    expect(new Set(cudaKernels.map((k) => k.struct)).size).toBe(cudaKernels.length);
    expect(new Set(cudaKernels.map((k) => k.kernel)).size).toBe(cudaKernels.length);
    expect(new Set(wgslKernels.map((k) => k.kernel)).size).toBe(wgslKernels.length);
  });

  it('give every float dtype its own FloatCode', () => {
    expect(Object.keys(FLOAT_CODE).sort()).toEqual([...FLOAT_DTYPES].sort());
    expect(new Set(Object.values(FLOAT_CODE)).size).toBe(FLOAT_DTYPES.length);
  });

  it('reject an entry point whose launch is not declared', () => {
    expect(() =>
      cudaKernel({ kernel: 'k', struct: 'KParams', doc: '', params: {}, launches: { a: { threads: 32 } }, entries: [{ name: 'k_b', launch: 'b' }] }),
    ).toThrow(/names launch 'b'/);
  });

  it('reject a binding that depends on an undeclared flag or names an undeclared type slot', () => {
    expect(() => wgslKernel({ kernel: 'k', doc: '', uniforms: {}, bindings: { x: read('u32', '', 'scatter') } })).toThrow(/'scatter'/);
    expect(() => wgslKernel({ kernel: 'k', doc: '', uniforms: {}, bindings: { x: read('Row', '') } })).toThrow(/type slot/);
    expect(() => wgslKernel({ kernel: 'k', doc: '', uniforms: {}, types: { Row: '' }, bindings: { x: read('Row', '') } })).not.toThrow();
  });

  it('reject more uniforms than one 256-byte block holds', () => {
    const uniforms = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, u32('')]));
    expect(() => wgslKernel({ kernel: 'k', doc: '', uniforms, bindings: {} })).toThrow(/256-byte/);
  });
});
