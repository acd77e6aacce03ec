import { createCpuBackend } from '@kvkit/kernels-cpu';
import { describe, expect, it } from 'vitest';
import { markdownTable, meetsTargets } from '../src/results.js';
import { bestCopy, summariseRepeats } from '../src/run.js';
import type { BenchResults } from '../src/results.js';
import { materializeShapes, normRopeShapes, ropePoolShapes } from '../src/shapes.js';
import { normRopeBytes, projectionFlops, ropePoolBytes } from '../src/traffic.js';
import { copiesFor, cosSinCache, materializeWorkload, normRopeWorkload, PAGE_SIZE, randomFloats, ropePoolWorkload } from '../src/workloads.js';

describe('what the benchmark measures', () => {
  it('covers the planned shapes: L ∈ {1, 5}, R ∈ {128, 64}, the D = 64 model, four token counts', () => {
    expect(normRopeShapes).toHaveLength(20);
    expect(new Set(normRopeShapes.map((s) => s.T))).toEqual(new Set([16, 256, 4096, 32768]));
    expect(normRopeShapes.some((s) => s.D === 64 && s.R === 32)).toBe(true);
    expect(ropePoolShapes.every((s) => s.Hq % s.H === 0)).toBe(true);
    expect(materializeShapes.map((s) => s.L * 2 * s.H * s.D)).toEqual([10240, 10240, 10240, 10240]);
  });

  it('counts kv once read and K, V once written, plus the small inputs', () => {
    const s = { L: 5, H: 8, D: 128, R: 128, T: 4096 };
    const kv = 4096 * 5 * 2048 * 2;
    const bytes = normRopeBytes(s, 65536);
    expect(bytes).toBeGreaterThan(2 * kv);
    expect(bytes - 2 * kv).toBe(4096 * 4 + 5 * 128 * 2 + 5 * 4 + 4096 * 128 * 4);
    expect(ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 })).toBe(2 * (2 * 4 * 8 * 2) + 5 * (2 * 2 * 8 * 2) + 2 * 2 * 4);
    expect(ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 }, 'bf16', { qkNorm: true }) - ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 })).toBe(2 * 8 * 2);
    expect(ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 }, 'f32')).toBe(2 * (2 * 4 * 8 * 4) + 5 * (2 * 2 * 8 * 4) + 2 * 2 * 4);
    expect(normRopeBytes(s, 65536, 'f32') - 2 * normRopeBytes(s, 65536, 'bf16')).toBe(-(4096 * 4 + 5 * 4 + 4096 * 128 * 4));
    expect(projectionFlops({ L: 5, H: 8, D: 128, R: 128, T: 4096, hidden: 4096 })).toBe(2 * 4096 * 4096 * 10240);
  });

  it('rotates enough input copies to leave the L2 for small problems, one for large', () => {
    expect(copiesFor(1e3)).toBe(32);
    expect(copiesFor(30e6)).toBe(4);
    expect(copiesFor(500e6)).toBe(1);
  });

  it('draws random data, never zeros, the same for the same seed', () => {
    const a = randomFloats(10_000, 3);
    expect(a).toEqual(randomFloats(10_000, 3));
    expect(a).not.toEqual(randomFloats(10_000, 4));
    expect(a.every((x) => x >= -1 && x < 1)).toBe(true);
    expect(a.filter((x) => x === 0).length).toBe(0);
  });

  it('builds the cos/sin cache of SEMANTICS.md: row p holds cos(p·f) then sin(p·f)', () => {
    const c = cosSinCache(3, 4, 100);
    expect(Array.from(c.slice(0, 4))).toEqual([1, 1, 0, 0]);
    expect(c[4 + 1]).toBeCloseTo(Math.cos(100 ** -0.5), 6);
    expect(c[8 + 2]).toBeCloseTo(Math.sin(2), 6);
  });
});

describe('workloads on the CPU reference', () => {
  it('run each op through the public API and read its outputs back', async () => {
    const backend = createCpuBackend();
    const fused = normRopeWorkload(backend, { L: 2, H: 2, D: 8, R: 8, T: 4 }, 2);
    const [kOut, vOut] = await fused.probe();
    expect(kOut).toHaveLength(2 * 4 * 2 * 8);
    expect(vOut?.some((x) => x !== 0)).toBe(true);
    fused.enqueue();
    fused.enqueue();
    fused.dispose();
    for (const dtype of ['f16', 'f32'] as const) {
      const other = normRopeWorkload(backend, { L: 1, H: 2, D: 8, R: 8, T: 3 }, 1, dtype);
      const [k] = await other.probe();
      expect(k?.some((x) => x !== 0)).toBe(true);
      other.dispose();
    }
    const plain = await ropePoolWorkload(backend, { N: 4, Hq: 4, H: 2, D: 8, R: 8 }, 1).probe();
    const normed = await ropePoolWorkload(backend, { N: 4, Hq: 4, H: 2, D: 8, R: 8 }, 1, 'bf16', { qkNorm: true }).probe();
    expect(normed[0]).not.toEqual(plain[0]); // the Q/K-norm changed qRot
    expect(normed[3]).toEqual(plain[3]); // and left V alone
    // An fp8 HND pool holds the same rows as the bf16 NHD one, to fp8's precision (scales between 0.05 and 0.175).
    const paged = await ropePoolWorkload(backend, { N: 20, Hq: 4, H: 2, D: 8, R: 8 }, 1, 'bf16', { poolDtype: 'fp8e4m3', layout: 'HND' }).probe();
    expect(paged[2]).toHaveLength(Math.ceil(20 / PAGE_SIZE) * 2 * PAGE_SIZE * 8);
    expect(paged[2]?.some((x) => x !== 0)).toBe(true);
    expect(ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 }) - ropePoolBytes({ N: 2, Hq: 4, H: 2, D: 8, R: 8 }, 'bf16', { poolDtype: 'fp8e4m3' })).toBe(2 * (2 * 2 * 8) - 2 * 2 * 4);
    const pool = ropePoolWorkload(backend, { N: 4, Hq: 4, H: 2, D: 8, R: 8 }, 1);
    const [qRot, , kPool] = await pool.probe();
    expect(qRot).toHaveLength(4 * 4 * 8);
    expect(kPool?.some((x) => x !== 0)).toBe(true);
    pool.dispose();
    const m = materializeWorkload(backend, { L: 2, H: 2, D: 8, R: 8, T: 3, hidden: 16 }, 1);
    const views = await m.probe();
    expect(views).toHaveLength(4); // k and v of each of the 2 layers
    expect(views[0]).toHaveLength(3 * 2 * 8);
    m.enqueue();
    m.dispose();
    backend.dispose();
  });
});

describe('results', () => {
  it('renders every ceiling and row, with fractions and targets', () => {
    const r: BenchResults = {
      schema: 1,
      date: '2026-01-01',
      gpu: 'Some GPU',
      driver: 'x',
      notes: ['a note'],
      ceilings: [{ name: 'cuda-copy', backend: 'cuda', unit: 'GB/s', value: 4000 }],
      rows: [{ op: 'fusedNormRopeStacked', impl: 'kvkit-cuda', dtype: 'bf16', shape: { T: 16 }, us: 3.5, bytes: 100, flops: 0, gbs: 3600, tflops: null, ceiling: 'cuda-copy', fraction: 0.9, target: 0.9 }],
    };
    const md = markdownTable(r);
    expect(md).toContain('| cuda-copy | cuda | 4000 GB/s |');
    expect(md).toContain('| fusedNormRopeStacked | bf16 | T=16 | kvkit-cuda | 3.50 |  | 3600 |  | 90.0% | cuda-copy | ≥ 90% | yes |');
    expect(md).toContain('- a note');
  });

  it('reads a row from its three repeats: the median of medians, and the largest distance from it', () => {
    const t = summariseRepeats([10, 12, 9].map((medianUs) => ({ medianUs, samplesUs: [medianUs], method: 'cuda-events' })));
    expect(t.us).toBe(10);
    expect(t.repeatsUs).toEqual([10, 12, 9]);
    expect(t.spread).toBeCloseTo(0.2, 12);
  });

  it('reads memory-bound rows against the fastest copy, never an arithmetic ceiling', () => {
    const copies = [
      { name: 'cuda-copy-grid-stride', backend: 'cuda', unit: 'GB/s' as const, value: 3900 },
      { name: 'cuMemcpyDtoDAsync', backend: 'cuda', unit: 'GB/s' as const, value: 4100 },
      { name: 'cublas-gemm', backend: 'cuda', unit: 'TFLOP/s' as const, value: 800 },
    ];
    expect(bestCopy(copies)?.name).toBe('cuMemcpyDtoDAsync');
    expect(bestCopy(copies.filter((c) => c.unit === 'TFLOP/s'))).toBeUndefined();
  });

  it('meets a target only when the fraction and the latency bound both hold', () => {
    const row = { op: 'fusedNormRopeStacked' as const, impl: 'kvkit-cuda', dtype: 'bf16' as const, shape: { T: 16 }, us: 4.5, bytes: 1, flops: 0, gbs: 1, tflops: null, ceiling: 'c', fraction: 0.95 };
    expect(meetsTargets(row)).toBeUndefined();
    expect(meetsTargets({ ...row, target: 0.9 })).toBe(true);
    expect(meetsTargets({ ...row, target: 0.9, targetUs: 4 })).toBe(false);
    expect(meetsTargets({ ...row, target: 0.99 })).toBe(false);
    // With a same-size copy, the target holds the row to a copy of its own bytes.
    expect(meetsTargets({ ...row, target: 0.9, gbs: 850, sizedCopyGbs: 1000 })).toBe(false);
    expect(meetsTargets({ ...row, fraction: 0.5, target: 0.9, gbs: 950, sizedCopyGbs: 1000 })).toBe(true);
  });
});
