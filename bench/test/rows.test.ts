import { createCpuBackend } from '@kvkit/kernels-cpu';
import { beforeAll, describe, expect, it } from 'vitest';
import type { Profiler } from '../src/profilers.js';
import { markdownTable, meetsTargets, referencedRow } from '../src/results.js';
import type { BenchResults, ResultRow } from '../src/results.js';
import { materializeIntoPools, REPEATS, rowLabel, runBackend, samplesFor, warmupFor } from '../src/run.js';
import type { BackendRun } from '../src/run.js';
import { scaledRope } from '../src/shapes.js';
import type { BenchPlan, MaterializeShape, PagedPlan } from '../src/shapes.js';
import { copySlotsBytes, dequantizeKvBytes, materializeIntoBytes, mlaPoolBytes, pagedAttentionBytes, ropePoolBytes } from '../src/traffic.js';
import {
  CACHE_ROWS,
  copiesFor,
  copySlotsWorkload,
  dequantizeKvWorkload,
  LONG_CONTEXT,
  materializeIntoWorkload,
  materializeWorkload,
  mlaPoolWorkload,
  PAGE_SIZE,
  pagedAttentionWorkload,
  pagedPoolSlots,
  randomFloats,
  randomPermutation,
  randomPositions,
  ropePoolWorkload,
  SharedInputs,
} from '../src/workloads.js';

describe('traffic of the new rows', () => {
  it('counts mRoPE’s three position streams, and nothing else, beyond plain RoPE', () => {
    const s = { N: 6, Hq: 4, H: 2, D: 8, R: 8 };
    const mrope = { rope: { mropeSection: [2, 1, 1] as const } };
    expect(ropePoolBytes(s, 'bf16', mrope) - ropePoolBytes(s)).toBe(2 * 6 * 4);
    expect(ropePoolBytes(s, 'bf16', { rope: {} })).toBe(ropePoolBytes(s));
  });

  it('counts materializeInto as hidden states and weights read once, pools written at their stored size', () => {
    const s: MaterializeShape = { L: 3, H: 2, D: 8, R: 4, T: 5, hidden: 16 };
    const bf16 = materializeIntoBytes(s, 100);
    const hidden = 5 * 16 * 2;
    const weight = 3 * 2 * 2 * 8 * 16 * 2;
    const pools = 2 * 3 * 5 * 2 * 8 * 2;
    expect(bf16).toBe(hidden + weight + pools + 3 * 8 * 2 + 3 * 4 + 2 * 5 * 4 + 5 * 4 * 4);
    // fp8: one byte an element, plus the per-head scales of both pools; the layout moves the same bytes.
    expect(bf16 - materializeIntoBytes(s, 100, { poolDtype: 'fp8e4m3' })).toBe(pools / 2 - 2 * 2 * 4);
    // The cos/sin rows touched are at most the cache's.
    expect(materializeIntoBytes(s, 100) - materializeIntoBytes(s, 2)).toBe(3 * 4 * 4);
  });
});

describe('mlaPoolFused rows', () => {
  it('count the latent rows read and written at the pool\'s stored size, q and qRot, the weight, positions and slots', () => {
    const s = { N: 3, C: 8, R: 4, Hq: 2, Dq: 6 };
    expect(mlaPoolBytes(s)).toBe(3 * 12 * 2 + 3 * 12 * 2 + 2 * (3 * 2 * 6 * 2) + 8 * 2 + 2 * 3 * 4);
    // fp8: a byte a pool element, plus the scale.
    expect(mlaPoolBytes(s) - mlaPoolBytes(s, 'bf16', { poolDtype: 'fp8e4m3' })).toBe(3 * 12 - 4);
  });

  it('write every slot of either pool and rotate every query head', async () => {
    const backend = createCpuBackend();
    const s = { N: 16, C: 32, R: 16, Hq: 2, Dq: 24 };
    for (const variant of [{}, { poolDtype: 'fp8e4m3' as const }]) {
      const w = mlaPoolWorkload(backend, s, 2, 'bf16', variant);
      const [qRot, pool] = await w.probe();
      expect(qRot).toHaveLength(s.N * s.Hq * s.Dq);
      expect(pool).toHaveLength(s.N * (s.C + s.R));
      w.enqueue();
      w.dispose();
    }
    backend.dispose();
  });
});

describe('dequantizeKv rows', () => {
  it('count the pool rows at their stored size, the rows written and the slots', () => {
    const s = { N: 6, Hq: 4, H: 2, D: 8, R: 8 };
    expect(dequantizeKvBytes(s)).toBe(6 * 2 * 8 * 2 + 6 * 2 * 8 * 2 + 6 * 4);
    // fp8: a byte an element read, plus the per-head scale.
    expect(dequantizeKvBytes(s) - dequantizeKvBytes(s, 'bf16', { poolDtype: 'fp8e4m3' })).toBe(6 * 2 * 8 - 2 * 4);
  });

  it('read each scattered slot of every pool kind back into its row', async () => {
    const backend = createCpuBackend();
    const s = { N: 20, Hq: 4, H: 2, D: 8, R: 8 };
    for (const [name, pool] of materializeIntoPools) {
      const w = dequantizeKvWorkload(backend, s, 2, 'bf16', pool);
      const [rows] = await w.probe();
      expect(rows, name).toHaveLength(s.N * s.H * s.D);
      // Random codes decode to nonzero values, and no two rows read the same slot.
      expect(rows!.some((x) => x !== 0), name).toBe(true);
      const firsts = new Set(Array.from({ length: s.N }, (_, n) => rows![n * s.H * s.D]));
      expect(firsts.size, name).toBeGreaterThan(s.N / 2);
      w.enqueue();
      w.enqueue();
      w.dispose();
    }
    backend.dispose();
  });
});

describe('the new workloads on the CPU reference', () => {
  it('draws positions over a long context, uniform and in range', () => {
    const p = randomPositions(20_000, LONG_CONTEXT, 3);
    expect(Math.min(...p)).toBeGreaterThanOrEqual(0);
    expect(Math.max(...p)).toBeLessThan(LONG_CONTEXT);
    expect(Math.max(...p)).toBeGreaterThan(0.95 * LONG_CONTEXT); // they reach past the 65536 rows of the cache rows
    expect(new Set(p).size).toBeGreaterThan(18_000);
  });

  it('runs every scaled RoPE config, each rotating q and k differently from plain RoPE and leaving V alone', async () => {
    const backend = createCpuBackend();
    const s = { N: 5, Hq: 4, H: 2, D: 128, R: 128 };
    const plain = ropePoolWorkload(backend, s, 1);
    const [qPlain, kPlain, , vPlain] = await plain.probe();
    plain.dispose();
    for (const [name, rope] of scaledRope) {
      const w = ropePoolWorkload(backend, s, 2, 'bf16', { rope });
      const [q, k, , v] = await w.probe();
      expect(q, name).not.toEqual(qPlain);
      expect(k, name).not.toEqual(kPlain);
      expect(v, name).toEqual(vPlain);
      w.enqueue();
      w.enqueue();
      w.dispose();
    }
    backend.dispose();
  });

  it('writes through materializeInto exactly what materialize hands out, at the scattered slots, in each pool', async () => {
    const backend = createCpuBackend();
    const s: MaterializeShape = { L: 2, H: 2, D: 8, R: 8, T: 20, hidden: 16 };
    const views = await materializeWorkload(backend, s, 1).probe(); // k0, v0, k1, v1, each [T, H, D]
    const row = s.H * s.D;
    const slotOf = (t: number) => (t * 7919) % s.T;
    // The per-head scales the workload gives fp8 pools.
    const [kScales, vScales] = [19, 23].map((seed) => Float32Array.from(randomFloats(s.H, seed), (x) => 0.05 + Math.abs(x) / 8));
    for (const [name, pool] of materializeIntoPools) {
      const w = materializeIntoWorkload(backend, s, 2, pool);
      const [kPool, vPool] = await w.probe();
      const hnd = pool.layout === 'HND';
      const slots = hnd ? Math.ceil(s.T / PAGE_SIZE) * PAGE_SIZE : s.T;
      expect(kPool, name).toHaveLength(s.L * slots * row);
      for (let l = 0; l < s.L; l++) {
        for (let t = 0; t < s.T; t++) {
          const slot = slotOf(t);
          for (let h = 0; h < s.H; h++) {
            // NHD: [L, S, H, D]; HND: [L, pages, H, PAGE_SIZE, D].
            const at = hnd ? ((l * (slots / PAGE_SIZE) + Math.floor(slot / PAGE_SIZE)) * s.H + h) * PAGE_SIZE * s.D + (slot % PAGE_SIZE) * s.D : (l * slots + slot) * row + h * s.D;
            const got = [kPool!.subarray(at, at + s.D), vPool!.subarray(at, at + s.D)];
            const want = [views[2 * l]!.subarray(t * row + h * s.D, t * row + (h + 1) * s.D), views[2 * l + 1]!.subarray(t * row + h * s.D, t * row + (h + 1) * s.D)];
            const where = `${name} layer ${l} token ${t} head ${h}`;
            if (!pool.poolDtype) expect(got, where).toEqual(want);
            else {
              // fp8 holds x / scale, the scale per head; read() decodes the codes only. e4m3 keeps 3 fraction bits: within
              // 2^-4 relative, or half its least subnormal (2^-10) times the scale near zero.
              [kScales[h]!, vScales[h]!].forEach((scale, i) => {
                const worst = Math.max(...want[i]!.map((x, e) => Math.abs(got[i]![e]! * scale - x) - (2 ** -4 * Math.abs(x) + 2 ** -10 * scale)));
                expect(worst, where).toBeLessThanOrEqual(1e-7);
              });
            }
          }
        }
      }
      w.enqueue();
      w.dispose();
    }
    backend.dispose();
  });
});

/** A plan of small shapes: longTokens 20 makes the T or N = 24 shapes the long ones. */
const smallPlan: BenchPlan = {
  normRope: [
    { L: 1, H: 2, D: 8, R: 8, T: 16 },
    { L: 1, H: 2, D: 8, R: 8, T: 24 },
  ],
  ropePool: [
    { N: 8, Hq: 4, H: 2, D: 128, R: 128 },
    { N: 24, Hq: 4, H: 2, D: 128, R: 128 },
    { N: 24, Hq: 4, H: 2, D: 128, R: 64 },
  ],
  materialize: [
    { L: 2, H: 2, D: 128, R: 128, T: 8, hidden: 32 },
    { L: 2, H: 2, D: 128, R: 128, T: 24, hidden: 32 },
  ],
  longTokens: 20,
};

/** A profiler over the CPU backend: each timing runs the call once and reports the next of a few made-up times. */
function fakeProfiler() {
  const backend = createCpuBackend();
  let timings = 0;
  const copyCalls: { copy: string; bytes: number; copies: number; reps: number }[] = [];
  const timeCalls: { reps: number; warmup: number | undefined }[] = [];
  const profiler: Profiler = {
    impl: 'kvkit-cuda',
    backend,
    gemmCeiling: 'cublas-gemm',
    callsPerSample: 10,
    time: async (enqueue, reps, warmup) => {
      timeCalls.push({ reps, warmup });
      enqueue();
      const medianUs = 10 + (timings++ % 7);
      return { medianUs, samplesUs: [medianUs], method: 'made-up' };
    },
    ceilings: async () => [
      { name: 'slow-copy', backend: 'cpu', unit: 'GB/s', value: 100 },
      { name: 'fast-copy', backend: 'cpu', unit: 'GB/s', value: 200 },
      { name: 'cublas-gemm', backend: 'cpu', unit: 'TFLOP/s', value: 1 },
    ],
    copyAt: async (copy, bytes, copies, reps) => {
      copyCalls.push({ copy, bytes, copies, reps });
      return { gbs: 150 + copyCalls.length };
    },
    gemm: async () => ({ medianUs: 9, samplesUs: [9], method: 'made-up', tflops: 1, engine: 'cublasLt' }),
  };
  return { profiler, copyCalls, timeCalls };
}

const labelOf = (r: ResultRow) => rowLabel(r.op, r.dtype, r.shape, r.variant);

describe('a run of the harness', () => {
  let full: { run: BackendRun; copyCalls: ReturnType<typeof fakeProfiler>['copyCalls']; timeCalls: ReturnType<typeof fakeProfiler>['timeCalls'] } | undefined;
  // One run of the small plan for the checks below: bf16 and f32, every row (each op's check on the CPU takes a while).
  beforeAll(async () => {
    const { profiler, copyCalls, timeCalls } = fakeProfiler();
    full = { run: await runBackend(profiler, () => {}, { dtypes: ['bf16', 'f32'], plan: smallPlan }), copyCalls, timeCalls };
    profiler.backend.dispose();
  }, 180_000);
  const runFull = async () => full!;

  it('reads each scaled RoPE row against the plain row of its shape: plain µs over its own, target 1/1.05', async () => {
    const { run } = await runFull();
    expect(run.notes.filter((n) => !n.includes('relative error'))).toEqual([]);
    const scaled = run.rows.filter((r) => r.ceiling === 'plain ropePoolFused');
    // bf16 only, at the long R = 128 shape only.
    expect(scaled.map(labelOf)).toEqual(scaledRope.map(([name]) => rowLabel('ropePoolFused', 'bf16', { N: 24, Hq: 4, H: 2, D: 128, R: 128 }, name)));
    for (const r of scaled) {
      const plain = referencedRow(run.rows, r);
      expect(plain && labelOf(plain)).toBe(rowLabel('ropePoolFused', 'bf16', r.shape));
      expect(r.fraction).toBe(plain!.us / r.us);
      expect(r.target).toBe(1 / 1.05);
      expect(meetsTargets(r)).toBe(r.us <= 1.05 * plain!.us);
      expect(r.sizedCopyGbs).toBeUndefined();
      expect(r.bytes).toBe(ropePoolBytes(r.shape as never, 'bf16', { rope: scaledRope.find(([n]) => n === r.variant)![1] }));
    }
  });

  it('reads each materializeInto row against the projection alone, at the long token counts, with its bytes at stored sizes', async () => {
    const { run } = await runFull();
    const into = run.rows.filter((r) => r.op === 'materializeInto');
    const s = smallPlan.materialize[1]!;
    expect(into.map(labelOf)).toEqual(materializeIntoPools.map(([name]) => rowLabel('materializeInto', 'bf16', { ...s }, name)));
    for (const r of into) {
      const projection = referencedRow(run.rows, r);
      expect(projection?.op).toBe('projection');
      expect(projection?.impl).toBe('kvkit-cuda (cublasLt)');
      expect(r.fraction).toBe(projection!.us / r.us);
      expect(r.target).toBe(1 / 1.05);
      expect(r.bytes).toBe(materializeIntoBytes(s, CACHE_ROWS, materializeIntoPools.find(([n]) => n === r.variant)![1]));
      expect(r.gbs).toBeNull();
    }
  });

  it('times the best copy at the size of every row with a bandwidth target, rotated like the row, and at no other', async () => {
    const { run, copyCalls } = await runFull();
    const bandwidth = run.rows.filter((r) => r.ceiling === 'fast-copy');
    expect(bandwidth.length).toBeGreaterThan(0);
    expect(run.rows.some((r) => r.ceiling === 'slow-copy')).toBe(false);
    const sized = bandwidth.filter((r) => r.target !== undefined);
    // Both dtypes: T = 24 fused rows, N = 24 plain rows (R = 128 and 64), then the qk-norm and HND variants; bf16 also
    // the fp8 ones, and dequantizeKv from each of the four pool kinds.
    expect(sized).toHaveLength(2 * (1 + 2 + 2) + 2 + materializeIntoPools.length);
    expect(sized.filter((r) => r.op === 'dequantizeKv').map(labelOf)).toEqual(materializeIntoPools.map(([name]) => rowLabel('dequantizeKv', 'bf16', { N: 24, H: 2, D: 128 }, name)));
    expect(copyCalls.map((c) => c.bytes)).toEqual(sized.map((r) => r.bytes));
    for (const [i, r] of sized.entries()) {
      // As many samples as the row's own timing takes: sized by the time the best copy (200 GB/s here) would take.
      expect(copyCalls[i]).toEqual({ copy: 'fast-copy', bytes: r.bytes, copies: copiesFor(r.bytes), reps: samplesFor(r.bytes / 200e3, 10) });
      expect(r.sizedCopyGbs).toBe(151 + i);
    }
    for (const r of run.rows.filter((x) => x.target === undefined || x.ceiling !== 'fast-copy')) expect(r.sizedCopyGbs, labelOf(r)).toBeUndefined();
  });

  it('times each row in three repeats of 5 to 100 samples, the first after 3 warm-up calls and the others after 1', async () => {
    const { run, timeCalls } = await runFull();
    expect(timeCalls.every((c) => c.reps >= 5 && c.reps <= 100)).toBe(true);
    // The fake profiler's projections are not timed through time(): every other row is, three times.
    expect(timeCalls).toHaveLength(3 * run.rows.filter((r) => r.op !== 'projection').length);
    expect(timeCalls.map((c) => c.warmup)).toEqual(timeCalls.map((_, i) => warmupFor(i % 3)));
  });

  it('labels every row once, and every reference names exactly one row', async () => {
    const { run } = await runFull();
    const labels = run.rows.map((r) => `${r.impl} ${labelOf(r)}`);
    expect(new Set(labels).size).toBe(labels.length);
    for (const r of run.rows.filter((x) => x.reference)) expect(referencedRow(run.rows, r), labelOf(r)).toBeDefined();
  });

  it('with --only, runs the rows matched and the rows they are read against, nothing else', async () => {
    const { profiler } = fakeProfiler();
    const only = /ropePoolFused bf16 N=24 .*\(yarn\)|materializeInto .*T=24.*\(fp8e4m3 HND pool\)/;
    const run = await runBackend(profiler, () => {}, { dtypes: ['bf16'], plan: smallPlan, only });
    profiler.backend.dispose();
    const s = smallPlan.materialize[1]!;
    expect(run.rows.map((r) => `${r.impl} ${labelOf(r)}`)).toEqual([
      `kvkit-cuda ${rowLabel('ropePoolFused', 'bf16', { N: 24, Hq: 4, H: 2, D: 128, R: 128 })}`,
      `kvkit-cuda ${rowLabel('ropePoolFused', 'bf16', { N: 24, Hq: 4, H: 2, D: 128, R: 128 }, 'yarn')}`,
      `kvkit-cuda (cublasLt) ${rowLabel('projection', 'bf16', { ...s })}`,
      `kvkit-cuda ${rowLabel('materializeInto', 'bf16', { ...s }, 'fp8e4m3 HND pool')}`,
    ]);
    for (const r of run.rows.filter((x) => x.reference)) expect(referencedRow(run.rows, r)).toBeDefined();
  });
});

describe('the markdown table of the new rows', () => {
  it('names the row a fraction is of with its time, and gives the same-size copy with the row’s share of it', () => {
    const base = { impl: 'kvkit-cuda', dtype: 'bf16' as const, shape: { N: 4096 }, flops: 0, tflops: null, bytes: 1e9 };
    const plain: ResultRow = { ...base, op: 'ropePoolFused', us: 250, gbs: 4000, ceiling: 'fast-copy', fraction: 0.8, target: 0.9, sizedCopyGbs: 4800 };
    const yarn: ResultRow = { ...base, op: 'ropePoolFused', variant: 'yarn', us: 260, gbs: 3846, ceiling: 'plain ropePoolFused', fraction: 250 / 260, reference: { op: 'ropePoolFused', impl: 'kvkit-cuda' }, target: 1 / 1.05 };
    const r: BenchResults = { schema: 1, date: '2026-01-01', gpu: 'g', driver: 'd', notes: [], ceilings: [], rows: [plain, yarn] };
    const md = markdownTable(r);
    expect(md).toContain('| ropePoolFused | bf16 | N=4096 | kvkit-cuda | 250.00 |  | 4000 |  | 80.0% | fast-copy | ≥ 90% | no | 4800 (83.3%) |');
    // The target holds the row to its same-size copy, not to the large copy.
    expect(markdownTable({ ...r, rows: [{ ...plain, sizedCopyGbs: 4300 }] })).toContain('| 80.0% | fast-copy | ≥ 90% | yes | 4300 (93.0%) |');
    expect(md).toContain('| ropePoolFused (yarn) | bf16 | N=4096 | kvkit-cuda | 260.00 |  | 3846 |  | 96.2% | plain ropePoolFused, 250.00 µs | ≥ 95% | yes |  |');
    // A reference the results do not hold (a run cut short) leaves the label alone.
    expect(markdownTable({ ...r, rows: [yarn] })).toContain('| 96.2% | plain ropePoolFused | ≥ 95% | yes |  |');
  });
});

describe('how long each row is timed', () => {
  it('sizes a repeat to about 1 ms of device time, 5 to 100 samples, with 3 warm-up calls before the first repeat and 1 before the others', async () => {
    expect(samplesFor(5, 10)).toBe(20); // CUDA, a 5 µs call: 20 samples of 10 calls
    expect(samplesFor(0.5, 10)).toBe(20); // no call is taken to be shorter than 5 µs
    expect(samplesFor(10)).toBe(100); // WebGPU times each call: at most 100
    expect(samplesFor(55)).toBe(19);
    expect(samplesFor(400)).toBe(5);
    expect(samplesFor(80_000)).toBe(5);
    expect([0, 1, 2].map(warmupFor)).toEqual([3, 1, 1]);
  });
});

describe('inputs shared between rows', () => {
  it('gives every row that asks for the same data the same tensor, which a workload leaves for the others', async () => {
    const backend = createCpuBackend();
    const shared = new SharedInputs(backend);
    expect(shared.random('bf16', [2, 3], 5)).toBe(shared.random('bf16', [2, 3], 5));
    expect(shared.random('bf16', [2, 3], 5)).not.toBe(shared.random('bf16', [2, 3], 6));
    const s = { N: 6, Hq: 4, H: 2, D: 8, R: 8 };
    const alone = await ropePoolWorkload(backend, s, 2).probe();
    const a = ropePoolWorkload(backend, s, 2, 'bf16', {}, shared);
    const b = ropePoolWorkload(backend, { ...s, R: 4 }, 2, 'bf16', {}, shared);
    expect(await a.probe()).toEqual(alone); // the same data as a workload of its own
    a.dispose();
    await b.probe(); // its q, k and v outlive the workload that made them
    b.dispose();
    const q = shared.random('bf16', [6, 4, 8], 21);
    expect(q.disposed).toBe(false);
    shared.dispose();
    expect(q.disposed).toBe(true);
    backend.dispose();
  });
});

describe('pagedAttention and copySlots rows', () => {
  const paged: PagedPlan = {
    decode: { B: 2, kvLen: 24, Hq: 4, H: 2, D: 128 },
    long: { B: 1, kvLen: 48, Hq: 4, H: 2, D: 128 },
    verifyQueries: 3,
    copySlots: [{ M: 8, H: 2, D: 128 }],
  };
  const pagedOnly: BenchPlan = { normRope: [], ropePool: [], materialize: [], longTokens: 20, paged };

  it('count q, out and the lse, every cached K and V row at its stored size, the slots and offsets; copySlots both sides', () => {
    const s = { B: 2, kvLen: 5, Hq: 4, H: 2, D: 8 };
    const kv = 2 * (10 * 2 * 8 * 2);
    expect(pagedAttentionBytes(s, 3)).toBe(2 * (6 * 4 * 8 * 2) + 6 * 4 * 4 + kv + 10 * 4 + 2 * 3 * 4);
    expect(pagedAttentionBytes(s, 3) - pagedAttentionBytes(s, 3, 'bf16', { poolDtype: 'fp8e4m3' })).toBe(kv / 2 - 2 * 2 * 4);
    expect(copySlotsBytes({ M: 3, H: 2, D: 8 })).toBe(2 * (2 * 3 * 2 * 8 * 2) + 2 * 3 * 4);
    expect(copySlotsBytes({ M: 3, H: 2, D: 8 }) - copySlotsBytes({ M: 3, H: 2, D: 8 }, 'bf16', { dstPoolDtype: 'fp8e4m3' })).toBe(2 * 3 * 2 * 8 - 2 * 2 * 4);
    expect(pagedPoolSlots([paged.decode, paged.long])).toBe(48);
    expect(pagedPoolSlots([{ ...paged.decode, kvLen: 25 }])).toBe(64);
    const perm = randomPermutation(1000, 3);
    expect(new Set(perm).size).toBe(1000);
    expect(Math.min(...perm)).toBe(0);
    expect(Math.max(...perm)).toBe(999);
    expect(perm).toEqual(randomPermutation(1000, 3));
  });

  it('run on the CPU reference: decode, verification and every pool kind, and copies into bf16 and fp8 pools', async () => {
    const backend = createCpuBackend();
    const s = paged.decode;
    for (const variant of [{}, { layout: 'HND' as const }, { poolDtype: 'fp8e4m3' as const }, { scattered: true }, { qLen: 3 }]) {
      const w = pagedAttentionWorkload(backend, s, 2, variant);
      const [out, lse] = await w.probe();
      const N = s.B * (('qLen' in variant && variant.qLen) || 1);
      expect(out, JSON.stringify(variant)).toHaveLength(N * s.Hq * s.D);
      expect(lse).toHaveLength(N * s.Hq);
      expect(out!.every(Number.isFinite) && lse!.every(Number.isFinite)).toBe(true);
      w.enqueue();
      w.enqueue();
      w.dispose();
    }
    for (const variant of [{}, { dstPoolDtype: 'fp8e4m3' as const }]) {
      const w = copySlotsWorkload(backend, paged.copySlots[0]!, 2, variant);
      const [k, v] = await w.probe();
      expect(k).toHaveLength(8 * 2 * 128);
      expect(k!.some((x) => x !== 0) && v!.some((x) => x !== 0)).toBe(true);
      w.enqueue();
      w.dispose();
    }
    backend.dispose();
  });

  it('read decode, the long request and the copies against the same-size copy, and verification against decode', async () => {
    const { profiler, copyCalls } = fakeProfiler();
    const run = await runBackend(profiler, () => {}, { dtypes: ['bf16'], plan: pagedOnly });
    profiler.backend.dispose();
    expect(run.notes.filter((n) => !n.includes('relative error'))).toEqual([]);
    const d = { ...paged.decode };
    expect(run.rows.map(labelOf)).toEqual([
      rowLabel('pagedAttention', 'bf16', d),
      rowLabel('pagedAttention', 'bf16', d, 'HND pool'),
      rowLabel('pagedAttention', 'bf16', d, 'fp8e4m3 pool'),
      rowLabel('pagedAttention', 'bf16', d, 'fp8e4m3 HND pool'),
      rowLabel('pagedAttention', 'bf16', d, 'scattered slots'),
      rowLabel('pagedAttention', 'bf16', d, 'verification, 3 queries'),
      rowLabel('pagedAttention', 'bf16', { ...paged.long }),
      rowLabel('copySlots', 'bf16', { ...paged.copySlots[0]! }),
      rowLabel('copySlots', 'bf16', { ...paged.copySlots[0]! }, 'to fp8e4m3 pool'),
    ]);
    const [decode, , fp8, , , verify, long, copy, toFp8] = run.rows;
    for (const r of run.rows) expect(r.checkError, labelOf(r)).toBeLessThanOrEqual(1e-2);
    expect(run.rows.slice(0, 5).map((r) => r.target)).toEqual([0.85, 0.85, 0.85, 0.85, 0.85]);
    expect(long!.target).toBe(0.8);
    expect(fp8!.bytes).toBe(pagedAttentionBytes(paged.decode, 1, 'bf16', { poolDtype: 'fp8e4m3' }));
    expect(verify!.bytes).toBe(pagedAttentionBytes(paged.decode, 3));
    expect(referencedRow(run.rows, verify!)).toBe(decode);
    expect(verify!.fraction).toBe(decode!.us / verify!.us);
    expect(verify!.target).toBe(1 / 1.3);
    expect(verify!.sizedCopyGbs).toBeUndefined();
    expect([copy!.target, toFp8!.target]).toEqual([0.9, 0.9]);
    expect(toFp8!.bytes).toBe(copySlotsBytes(paged.copySlots[0]!, 'bf16', { dstPoolDtype: 'fp8e4m3' }));
    // Every row but verification has its same-size copy.
    expect(copyCalls.map((c) => c.bytes)).toEqual(run.rows.filter((r) => r !== verify).map((r) => r.bytes));
  });

  it('with --only verification, measures the decode row it is read against too', async () => {
    const { profiler } = fakeProfiler();
    const run = await runBackend(profiler, () => {}, { dtypes: ['bf16'], plan: pagedOnly, only: /verification/ });
    profiler.backend.dispose();
    expect(run.rows.map(labelOf)).toEqual([rowLabel('pagedAttention', 'bf16', { ...paged.decode }), rowLabel('pagedAttention', 'bf16', { ...paged.decode }, 'verification, 3 queries')]);
  });

  it('skips an op the backend does not run, with a note, and measures the rest', async () => {
    const { profiler } = fakeProfiler();
    const backend = profiler.backend;
    const lacking = Object.create(backend, { ops: { value: backend.ops.filter((op) => op !== 'pagedAttention') } }) as typeof backend;
    const logged: string[] = [];
    const run = await runBackend({ ...profiler, backend: lacking }, (line) => logged.push(line), { dtypes: ['bf16'], plan: pagedOnly });
    backend.dispose();
    expect(run.rows.map((r) => r.op)).toEqual(['copySlots', 'copySlots']);
    expect(run.notes).toContain('kvkit-cuda pagedAttention: not measured: the backend does not run it yet (backend.ops lacks it)');
    expect(logged).toContain('kvkit-cuda pagedAttention: not measured: the backend does not run it yet (backend.ops lacks it)');
  });
});

describe('f16 and f32', () => {
  it('run one plain row of each op, where the plan names their shapes', async () => {
    const { profiler } = fakeProfiler();
    const plan: BenchPlan = { ...smallPlan, materialize: [], otherDtypes: { normRope: [smallPlan.normRope[1]!], ropePool: [smallPlan.ropePool[1]!] } };
    const run = await runBackend(profiler, () => {}, { dtypes: ['f32'], plan });
    profiler.backend.dispose();
    expect(run.rows.map(labelOf)).toEqual([rowLabel('fusedNormRopeStacked', 'f32', { ...smallPlan.normRope[1]! }), rowLabel('ropePoolFused', 'f32', { ...smallPlan.ropePool[1]! })]);
  });
});

describe('materializer schedules', () => {
  it('times each schedule besides the default as a variant of every long materialize row, under that schedule, against the same projection', async () => {
    const { profiler } = fakeProfiler();
    let current = 'batched';
    const timedUnder: string[] = [];
    const withSchedules: Profiler = {
      ...profiler,
      time: (enqueue, reps, warmup) => {
        timedUnder.push(current);
        return profiler.time(enqueue, reps, warmup);
      },
      materializerSchedules: {
        others: () => ['overlapped'],
        run: async (schedule, body) => {
          const before = current;
          current = schedule;
          try {
            return await body();
          } finally {
            current = before;
          }
        },
      },
    };
    const run = await runBackend(withSchedules, () => {}, { dtypes: ['bf16'], plan: { ...smallPlan, normRope: [], ropePool: [] }, only: /^materialize/ });
    profiler.backend.dispose();
    const s = smallPlan.materialize[1]!;
    const scheduled = run.rows.filter((r) => r.variant?.endsWith('overlapped'));
    expect(scheduled.map(labelOf)).toEqual([rowLabel('materialize', 'bf16', { ...s }, 'overlapped'), ...materializeIntoPools.map(([name]) => rowLabel('materializeInto', 'bf16', { ...s }, `${name}, overlapped`))]);
    for (const r of scheduled) {
      const projection = referencedRow(run.rows, r);
      expect(projection?.op).toBe('projection');
      expect(r.fraction).toBe(projection!.us / r.us);
      expect(r.target).toBe(1 / 1.05);
      expect(r.checkError).toBeLessThan(1e-2);
    }
    // Only those rows ran under the other schedule, each repeat of them.
    expect(timedUnder.filter((x) => x === 'overlapped')).toHaveLength(REPEATS * scheduled.length);
    expect(run.rows.filter((r) => r.op !== 'projection' && !r.variant?.endsWith('overlapped')).length * REPEATS).toBe(timedUnder.filter((x) => x === 'batched').length);
  }, 120_000);
});
