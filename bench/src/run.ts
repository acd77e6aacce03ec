import type { Backend, FloatDType } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import type { DeviceTiming, GemmTiming, Profiler } from './profilers.js';
import type { Ceiling, ResultRow } from './results.js';
import { materializeShapes, normRopeShapes, ropePoolShapes } from './shapes.js';
import type { MaterializeShape, NormRopeShape, RopePoolShape } from './shapes.js';
import { normRopeBytes, projectionFlops, ropePoolBytes } from './traffic.js';
import { CACHE_ROWS, copiesFor, materializeWorkload, normRopeWorkload, ropePoolWorkload } from './workloads.js';
import type { RopePoolVariant, Workload } from './workloads.js';

/** The plan's targets (PERFORMANCE.md), as fractions of a ceiling of the same run, or device time. */
interface Targets {
  /** Memory-bound rows at T or N ≥ 4096, against the best copy. */
  readonly bandwidth: number;
  /** The most device time fusedNormRopeStacked may take at T = 16, and (where set) with L = 1 at T = 256. */
  readonly smallTokensUs?: number;
  readonly oneLayerT256Us?: number;
  /** Projection alone / materialize end to end, T ≥ 4096. */
  readonly materialize?: number;
  /** The projection against the arithmetic ceiling, T ≥ 4096. */
  readonly gemm?: number;
  /** The backend's own GEMM against the engine that normally runs the projection, T ≥ 4096. */
  readonly ownGemm?: number;
}

const TARGETS: Record<string, Targets> = {
  'kvkit-cuda': { bandwidth: 0.9, smallTokensUs: 4, oneLayerT256Us: 4, materialize: 1 / 1.05, ownGemm: 0.5 },
  'kvkit-webgpu': { bandwidth: 0.8, smallTokensUs: 10, gemm: 0.5 },
};

/** Each row is timed this many times, one after the other, and the spread recorded. */
export const REPEATS = 3;

/** Relative L2 error each dtype's outputs may have against the f64 reference in the check before timing. */
const CHECK_TOLERANCE: Record<FloatDType, number> = { bf16: 1e-2, f16: 2e-3, f32: 1e-4 };

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

function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** A row's time from its repeats: the median of their medians, each repeat's median, and the largest relative distance from it. */
export function summariseRepeats(timings: readonly DeviceTiming[]): Pick<ResultRow, 'us' | 'repeatsUs' | 'spread' | 'method'> {
  const repeatsUs = timings.map((t) => t.medianUs);
  const us = median(repeatsUs);
  return { us, repeatsUs, spread: Math.max(...repeatsUs.map((r) => Math.abs(r - us) / us)), method: timings[0]?.method };
}

/** The copy ceiling a backend's memory-bound rows are read against: the fastest of its copies. */
export function bestCopy(ceilings: readonly Ceiling[]): Ceiling | undefined {
  return ceilings.filter((c) => c.unit === 'GB/s').reduce<Ceiling | undefined>((best, c) => (!best || c.value > best.value ? c : best), undefined);
}

export interface BackendRun {
  readonly ceilings: Ceiling[];
  readonly rows: ResultRow[];
  readonly notes: string[];
}

export interface RunOptions {
  /** The dtypes of the memory-bound rows (the projection and materialize rows are bf16). */
  readonly dtypes?: readonly FloatDType[];
  /** Only the rows whose label (`op dtype dims (variant)`, as logged) matches; the ceilings and checks still run. */
  readonly only?: RegExp;
}

export async function runBackend(p: Profiler, log: (line: string) => void, opts: RunOptions = {}): Promise<BackendRun> {
  const targets = TARGETS[p.impl] ?? { bandwidth: 0 };
  const dtypes = opts.dtypes ?? (['bf16', 'f16', 'f32'] as const);
  const wanted = (label: string) => !opts.only || opts.only.test(label);
  const measured = await p.ceilings();
  const best = bestCopy(measured);
  if (!best) throw new Error(`${p.impl}: no copy ceiling was measured`);
  const ceilings = measured.map((c) => (c === best ? { ...c, best: true as const } : c));
  const ceiling = (name: string) => ceilings.find((c) => c.name === name)?.value ?? Number.NaN;
  for (const c of ceilings) log(`${p.impl}: ceiling ${c.name} = ${c.value.toFixed(1)} ${c.unit}${c === ceilings.find((x) => x.best) ? ' (best copy)' : ''}`);
  const copy = best.value;
  const rows: ResultRow[] = [];
  const notes: string[] = [];

  const timeRepeated = async (enqueue: () => void, reps: number) => {
    const timings: DeviceTiming[] = [];
    for (let r = 0; r < REPEATS; r++) timings.push(await p.time(enqueue, reps));
    return summariseRepeats(timings);
  };
  const gemmRepeated = async (run: () => Promise<GemmTiming>) => {
    const timings: GemmTiming[] = [];
    for (let r = 0; r < REPEATS; r++) timings.push(await run());
    const t = summariseRepeats(timings);
    return { ...t, engine: timings[0]!.engine };
  };

  const checkSmall = async (what: string, dtype: FloatDType, make: (b: Backend) => Workload) => {
    const error = await check(make, p.backend);
    log(`${p.impl}: ${what} ${dtype} checked against the CPU reference: relative error ${error.toExponential(2)}`);
    if (!(error <= CHECK_TOLERANCE[dtype])) notes.push(`${p.impl} ${what} ${dtype}: relative error ${error.toExponential(2)} against the CPU reference exceeds the ${dtype} tolerance ${CHECK_TOLERANCE[dtype]}`);
    return error;
  };

  /** Times one memory-bound op on one shape and dtype, as a fraction of the best copy. */
  const measureBandwidth = async (op: 'fusedNormRopeStacked' | 'ropePoolFused', dtype: FloatDType, shape: Readonly<Record<string, number>>, bytes: number, make: () => Workload, extra: Partial<ResultRow>) => {
    const dims = `${Object.entries(shape).map(([k, v]) => `${k}=${v}`).join(' ')}${extra.variant ? ` (${extra.variant})` : ''}`;
    if (!wanted(`${op} ${dtype} ${dims}`)) return;
    let w: Workload;
    try {
      w = make();
    } catch (e) {
      // A shape past this backend's tensor limit (KV045) is a fact of the device, not a failed run.
      if (!(e instanceof ContractError)) throw e;
      notes.push(`${p.impl} ${op} ${dtype} ${dims}: not measured: ${e.message.split('\n')[0]}`);
      return;
    }
    const t = await timeRepeated(w.enqueue, repsFor(bytes));
    w.dispose();
    const gbs = bytes / t.us / 1e3;
    rows.push({ op, impl: p.impl, dtype, shape, ...t, bytes, flops: 0, gbs, tflops: null, ceiling: best.name, fraction: gbs / copy, ...extra });
    log(`${p.impl}: ${op} ${dtype} ${dims}: ${t.us.toFixed(2)} µs ±${(100 * (t.spread ?? 0)).toFixed(1)}%, ${gbs.toFixed(0)} GB/s (${((100 * gbs) / copy).toFixed(1)}% of ${best.name})`);
  };

  for (const dtype of dtypes) {
    const fusedError = await checkSmall('fusedNormRopeStacked', dtype, (b) => normRopeWorkload(b, { L: 5, H: 8, D: 128, R: 64, T: 256 }, 1, dtype));
    const poolError = await checkSmall('ropePoolFused', dtype, (b) => ropePoolWorkload(b, { N: 256, Hq: 32, H: 8, D: 128, R: 64 }, 1, dtype));
    for (const s of normRopeShapes) {
      const bytes = normRopeBytes(s, CACHE_ROWS, dtype);
      const latency = s.T === 16 ? targets.smallTokensUs : s.T === 256 && s.L === 1 ? targets.oneLayerT256Us : undefined;
      await measureBandwidth('fusedNormRopeStacked', dtype, { ...s }, bytes, () => normRopeWorkload(p.backend, s as NormRopeShape, copiesFor(bytes), dtype), {
        ...(s.T >= 4096 ? { target: targets.bandwidth } : {}),
        ...(latency !== undefined ? { targetUs: latency } : {}),
        checkError: fusedError,
      });
    }
    for (const s of ropePoolShapes) {
      const bytes = ropePoolBytes(s, dtype);
      await measureBandwidth('ropePoolFused', dtype, { ...s }, bytes, () => ropePoolWorkload(p.backend, s as RopePoolShape, copiesFor(bytes), dtype), {
        ...(s.N >= 4096 ? { target: targets.bandwidth } : {}),
        checkError: poolError,
      });
    }
    // Variants at N ≥ 4096, R = 128, with the same bandwidth target: the Q/K-norm before RoPE (Qwen3, Gemma 3), riding
    // on rows already read; pools in the paged HND layout; fp8 pools with per-head scales (bytes at their stored size).
    const variants: [string, RopePoolVariant][] = [
      ['qk-norm', { qkNorm: true }],
      ['HND pool', { layout: 'HND' }],
      ['fp8e4m3 pool', { poolDtype: 'fp8e4m3' }],
      ['fp8e4m3 HND pool', { poolDtype: 'fp8e4m3', layout: 'HND' }],
    ];
    for (const [name, variant] of variants) {
      if (variant.poolDtype && dtype !== 'bf16') continue; // fp8 pools are measured from bf16 inputs, as served
      const error = await checkSmall(`ropePoolFused (${name})`, dtype, (b) => ropePoolWorkload(b, { N: 256, Hq: 32, H: 8, D: 128, R: 64 }, 1, dtype, variant));
      for (const s of ropePoolShapes.filter((x) => x.R === 128 && x.N >= 4096)) {
        const bytes = ropePoolBytes(s, dtype, variant);
        await measureBandwidth('ropePoolFused', dtype, { ...s }, bytes, () => ropePoolWorkload(p.backend, s as RopePoolShape, copiesFor(bytes), dtype, variant), {
          variant: name,
          target: targets.bandwidth,
          checkError: error,
        });
      }
    }
  }

  const materializeError = await checkSmall('materialize', 'bf16', (b) => materializeWorkload(b, { L: 2, H: 8, D: 128, R: 128, T: 16, hidden: 1024 } as MaterializeShape, 1));
  for (const s of materializeShapes) {
    if (!wanted(`materialize bf16 ${Object.entries(s).map(([k, v]) => `${k}=${v}`).join(' ')}`)) continue;
    const flops = projectionFlops(s);
    const gemmShape = { T: s.T, K: s.hidden, N: s.L * 2 * s.H * s.D, dtype: 'bf16' as const };
    const gemm = await gemmRepeated(() => p.gemm(gemmShape));
    const projectionImpl = `${p.impl} (${gemm.engine})`;
    const tflops = flops / gemm.us / 1e6;
    rows.push({
      op: 'projection',
      impl: projectionImpl,
      dtype: 'bf16',
      shape: { ...s },
      ...gemm,
      bytes: 0,
      flops,
      gbs: null,
      tflops,
      ceiling: p.gemmCeiling,
      fraction: tflops / ceiling(p.gemmCeiling),
      ...(targets.gemm && s.T >= 4096 ? { target: targets.gemm } : {}),
    });
    if (p.ownGemm && gemm.engine !== 'kvkit') {
      const own = await gemmRepeated(() => p.ownGemm!(gemmShape));
      rows.push({
        op: 'projection',
        impl: `${p.impl} (${own.engine})`,
        dtype: 'bf16',
        shape: { ...s },
        ...own,
        bytes: 0,
        flops,
        gbs: null,
        tflops: flops / own.us / 1e6,
        ceiling: `projection on ${gemm.engine}`,
        fraction: gemm.us / own.us,
        reference: { op: 'projection', impl: projectionImpl },
        ...(targets.ownGemm && s.T >= 4096 ? { target: targets.ownGemm } : {}),
      });
      log(`${p.impl}: own GEMM T=${s.T}: ${own.us.toFixed(1)} µs, ${(flops / own.us / 1e6).toFixed(0)} TFLOP/s (${((100 * gemm.us) / own.us).toFixed(1)}% of ${gemm.engine})`);
    }
    const inputBytes = s.T * s.hidden * 2;
    const w = materializeWorkload(p.backend, s, copiesFor(inputBytes));
    const t = await timeRepeated(w.enqueue, repsFor(inputBytes + flops / 100));
    w.dispose();
    rows.push({
      op: 'materialize',
      impl: p.impl,
      dtype: 'bf16',
      shape: { ...s },
      ...t,
      bytes: 0,
      flops,
      gbs: null,
      tflops: flops / t.us / 1e6,
      ceiling: `projection alone (${gemm.engine})`,
      fraction: gemm.us / t.us,
      reference: { op: 'projection', impl: projectionImpl },
      ...(targets.materialize && s.T >= 4096 ? { target: targets.materialize } : {}),
      checkError: materializeError,
    });
    log(`${p.impl}: materialize T=${s.T} hidden=${s.hidden}: ${t.us.toFixed(1)} µs end to end, projection alone ${gemm.us.toFixed(1)} µs (${tflops.toFixed(0)} TFLOP/s, ${gemm.engine})`);
  }
  return { ceilings, rows, notes };
}
