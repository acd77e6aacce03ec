import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import type { Profiler } from './profilers.js';
import type { Ceiling, ResultRow } from './results.js';
import { materializeShapes, normRopeShapes, ropePoolShapes } from './shapes.js';
import type { MaterializeShape, NormRopeShape, RopePoolShape } from './shapes.js';
import { normRopeBytes, projectionFlops, ropePoolBytes } from './traffic.js';
import { CACHE_ROWS, copiesFor, materializeWorkload, normRopeWorkload, ropePoolWorkload } from './workloads.js';
import type { Workload } from './workloads.js';

/** The plan's targets (PERFORMANCE.md), as fractions of a ceiling of the same run. */
const TARGETS: Record<string, { bandwidth: number; smallTokensUs?: number; materialize?: number; gemm?: number }> = {
  'kvkit-cuda': { bandwidth: 0.9, smallTokensUs: 5, materialize: 1 / 1.1 },
  'kvkit-webgpu': { bandwidth: 0.8, gemm: 0.5 },
};

/** Relative L2 distance, the measure the conformance suite uses. */
function relativeError(got: Float32Array, want: Float32Array): number {
  let num = 0;
  let den = 0;
  for (let i = 0; i < want.length; i++) {
    const d = (got[i] as number) - (want[i] as number);
    num += d * d;
    den += (want[i] as number) ** 2;
  }
  return got.length === want.length ? Math.sqrt(num / Math.max(den, 1e-30)) : Number.POSITIVE_INFINITY;
}

/** Runs one call on the GPU and on the CPU reference with the same data; the worst output's error. */
async function check(make: (b: Backend) => Workload, gpu: Backend): Promise<number> {
  const cpu = createCpuBackend();
  const a = make(gpu);
  const b = make(cpu);
  try {
    const [got, want] = [await a.probe(), await b.probe()];
    return Math.max(...want.map((w, i) => relativeError(got[i] as Float32Array, w)));
  } finally {
    a.dispose();
    b.dispose();
    cpu.dispose();
  }
}

const repsFor = (bytes: number) => (bytes > 256e6 ? 10 : bytes > 16e6 ? 30 : 100);

export interface BackendRun {
  readonly ceilings: Ceiling[];
  readonly rows: ResultRow[];
  readonly notes: string[];
}

export async function runBackend(p: Profiler, log: (line: string) => void): Promise<BackendRun> {
  const targets = TARGETS[p.impl] ?? { bandwidth: 0 };
  const ceilings = await p.ceilings();
  const ceiling = (name: string) => ceilings.find((c) => c.name === name)?.value ?? Number.NaN;
  for (const c of ceilings) log(`${p.impl}: ceiling ${c.name} = ${c.value.toFixed(1)} ${c.unit}`);
  const rows: ResultRow[] = [];
  const notes: string[] = [];

  const checkSmall = async <S>(what: string, shape: S, make: (b: Backend, s: S) => Workload) => {
    const error = await check((b) => make(b, shape), p.backend);
    log(`${p.impl}: ${what} checked against the CPU reference: relative error ${error.toExponential(2)}`);
    if (!(error <= 1e-2)) notes.push(`${p.impl} ${what}: relative error ${error.toExponential(2)} against the CPU reference exceeds the bf16 tolerance 1e-2`);
    return error;
  };
  const fusedError = await checkSmall('fusedNormRopeStacked', { L: 5, H: 8, D: 128, R: 64, T: 256 } as NormRopeShape, (b, s) => normRopeWorkload(b, s, 1));
  const poolError = await checkSmall('ropePoolFused', { N: 256, Hq: 32, H: 8, D: 128, R: 64 } as RopePoolShape, (b, s) => ropePoolWorkload(b, s, 1));
  const materializeError = await checkSmall('materialize', { L: 2, H: 8, D: 128, R: 128, T: 16, hidden: 1024 } as MaterializeShape, (b, s) =>
    materializeWorkload(b, s, 1),
  );

  const copy = ceiling(p.copyCeiling);
  /** Times one memory-bound op on one shape and records it as a fraction of the copy ceiling. */
  const measureBandwidth = async (op: 'fusedNormRopeStacked' | 'ropePoolFused', shape: Readonly<Record<string, number>>, bytes: number, w: Workload, extra: Partial<ResultRow>) => {
    const t = await p.time(w.enqueue, repsFor(bytes));
    w.dispose();
    const gbs = bytes / t.medianUs / 1e3;
    rows.push({ op, impl: p.impl, dtype: 'bf16', shape, us: t.medianUs, bytes, flops: 0, gbs, tflops: null, ceiling: p.copyCeiling, fraction: gbs / copy, ...extra, method: t.method });
    const dims = Object.entries(shape).map(([k, v]) => `${k}=${v}`).join(' ');
    log(`${p.impl}: ${op} ${dims}: ${t.medianUs.toFixed(2)} µs, ${gbs.toFixed(0)} GB/s (${((100 * gbs) / copy).toFixed(1)}% of copy)`);
  };
  for (const s of normRopeShapes) {
    const bytes = normRopeBytes(s, CACHE_ROWS);
    await measureBandwidth('fusedNormRopeStacked', { ...s }, bytes, normRopeWorkload(p.backend, s, copiesFor(bytes)), {
      ...(s.T >= 4096 ? { target: targets.bandwidth } : {}),
      ...(s.T === 16 && targets.smallTokensUs ? { targetUs: targets.smallTokensUs } : {}),
      checkError: fusedError,
    });
  }
  for (const s of ropePoolShapes) {
    const bytes = ropePoolBytes(s);
    await measureBandwidth('ropePoolFused', { ...s }, bytes, ropePoolWorkload(p.backend, s, copiesFor(bytes)), {
      ...(s.N >= 4096 ? { target: targets.bandwidth } : {}),
      checkError: poolError,
    });
  }
  for (const s of materializeShapes) {
    const flops = projectionFlops(s);
    const gemm = await p.gemm({ T: s.T, K: s.hidden, N: s.L * 2 * s.H * s.D, dtype: 'bf16' });
    const gemmCeiling = ceiling(p.gemmCeiling);
    const projectionImpl = `${p.impl} (${gemm.engine})`;
    rows.push({
      op: 'projection',
      impl: projectionImpl,
      dtype: 'bf16',
      shape: { ...s },
      us: gemm.medianUs,
      bytes: 0,
      flops,
      gbs: null,
      tflops: gemm.tflops,
      ceiling: p.gemmCeiling,
      fraction: gemm.tflops / gemmCeiling,
      ...(targets.gemm && s.T >= 4096 ? { target: targets.gemm } : {}),
      method: gemm.method,
    });
    const inputBytes = s.T * s.hidden * 2;
    const w = materializeWorkload(p.backend, s, copiesFor(inputBytes));
    const t = await p.time(w.enqueue, repsFor(inputBytes + flops / 100));
    w.dispose();
    rows.push({
      op: 'materialize',
      impl: p.impl,
      dtype: 'bf16',
      shape: { ...s },
      us: t.medianUs,
      bytes: 0,
      flops,
      gbs: null,
      tflops: flops / t.medianUs / 1e6,
      ceiling: `projection alone (${gemm.engine})`,
      fraction: gemm.medianUs / t.medianUs,
      reference: { op: 'projection', impl: projectionImpl },
      ...(targets.materialize && s.T >= 4096 ? { target: targets.materialize } : {}),
      checkError: materializeError,
      method: t.method,
    });
    log(`${p.impl}: materialize T=${s.T} hidden=${s.hidden}: ${t.medianUs.toFixed(1)} µs end to end, projection alone ${gemm.medianUs.toFixed(1)} µs (${gemm.tflops.toFixed(0)} TFLOP/s, ${gemm.engine})`);
  }
  return { ceilings, rows, notes };
}
