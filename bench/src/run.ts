import type { Backend, FloatDType } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import type { DeviceTiming, GemmTiming, Profiler } from './profilers.js';
import type { Ceiling, ResultRow } from './results.js';
import { benchPlan, scaledRope } from './shapes.js';
import type { BenchPlan, MaterializeShape, RopePoolShape } from './shapes.js';
import { dequantizeKvBytes, materializeIntoBytes, normRopeBytes, projectionFlops, ropePoolBytes } from './traffic.js';
import { CACHE_ROWS, copiesFor, dequantizeKvWorkload, materializeIntoWorkload, materializeWorkload, normRopeWorkload, ropePoolWorkload } from './workloads.js';
import type { PoolVariant, RopePoolVariant, Workload } from './workloads.js';

/** The plan's targets, as fractions of a ceiling of the same run, or device time. */
interface Targets {
  /** Memory-bound rows at T or N ≥ 4096, every variant, against the same-size copy (a copy of the row's own bytes). */
  readonly bandwidth: number;
  /** The most device time a call may take at T or N ≤ 256 (the decode steps of a serving loop). */
  readonly smallBatchUs?: number;
  /** Caller outputs / outputs made by the op (the README's call form) of the same shape. */
  readonly opMadeOutputs: number;
  /** Projection alone / materialize (and materializeInto) end to end, T ≥ 4096. */
  readonly materialize?: number;
  /** Plain RoPE / scaled RoPE (llama3, YaRN, float32 angles, mRoPE) of the same ropePoolFused shape, N ≥ 4096. */
  readonly scaledRope: number;
  /** The projection against the arithmetic ceiling, T ≥ 4096. */
  readonly gemm?: number;
}

// The package's own CUDA GEMM keeps no target: cuBLASLt runs the projection wherever CUDA is; its rows are there to read.
const TARGETS: Record<string, Targets> = {
  'kvkit-cuda': { bandwidth: 0.9, smallBatchUs: 5, materialize: 1 / 1.05, scaledRope: 1 / 1.05, opMadeOutputs: 1 / 1.05 },
  'kvkit-webgpu': { bandwidth: 0.85, smallBatchUs: 12, gemm: 0.5, scaledRope: 1 / 1.05, opMadeOutputs: 1 / 1.05 },
};

/** Each row is timed this many times, one after the other, and the spread recorded. */
export const REPEATS = 3;

/** T or N up to which a call is a decode step, held to the small-batch latency target. */
const SMALL_BATCH = 256;

/** The variant of rows in the README's call form: outputs made by the op. */
export const OP_MADE = 'op-made outputs';

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

export const repsFor = (bytes: number) => (bytes > 256e6 ? 10 : bytes > 16e6 ? 30 : 100);

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

/** A row's label, as logged and as `--only` matches it: `op dtype dims (variant)`. */
export function rowLabel(op: ResultRow['op'], dtype: string, shape: Readonly<Record<string, number>>, variant?: string): string {
  return `${op} ${dtype} ${Object.entries(shape)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ')}${variant ? ` (${variant})` : ''}`;
}

/** The pools materializeInto rows write: bf16 and fp8e4m3, token-major (NHD) and paged (HND). */
export const materializeIntoPools: readonly (readonly [string, PoolVariant])[] = [
  ['NHD pool', {}],
  ['HND pool', { layout: 'HND' }],
  ['fp8e4m3 NHD pool', { poolDtype: 'fp8e4m3' }],
  ['fp8e4m3 HND pool', { poolDtype: 'fp8e4m3', layout: 'HND' }],
];

export interface RunOptions {
  /** The dtypes of the memory-bound rows (the projection and materialize rows are bf16). */
  readonly dtypes?: readonly FloatDType[];
  /**
   * Only the rows whose label (`op dtype dims (variant)`, as logged) matches, plus the rows those are read against
   * (plain RoPE for a scaled-RoPE row, the projection for materialize rows). The ceilings still run; an op's check
   * against the CPU reference runs only where one of its rows is measured.
   */
  readonly only?: RegExp;
  /** The shapes to measure: `benchPlan` unless given. */
  readonly plan?: BenchPlan;
}

export async function runBackend(p: Profiler, log: (line: string) => void, opts: RunOptions = {}): Promise<BackendRun> {
  const targets = TARGETS[p.impl] ?? { bandwidth: 0, scaledRope: 0, opMadeOutputs: 0 };
  const dtypes = opts.dtypes ?? (['bf16', 'f16', 'f32'] as const);
  const plan = opts.plan ?? benchPlan;
  const long = plan.longTokens;
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
  /** The check of one op and variant, run once, when the first row that needs it is measured. */
  const checker = (what: string, dtype: FloatDType, make: (b: Backend) => Workload) => {
    let error: Promise<number> | undefined;
    return () => (error ??= checkSmall(what, dtype, make));
  };

  /** The workload of a row, or a note where the backend refuses its shape. */
  const workloadFor = (label: string, make: () => Workload): Workload | undefined => {
    try {
      return make();
    } catch (e) {
      // A shape past this backend's tensor limit (KV045) is a fact of the device, not a failed run.
      if (!(e instanceof ContractError)) throw e;
      notes.push(`${p.impl} ${label}: not measured: ${e.message.split('\n')[0]}`);
      return undefined;
    }
  };

  /** The best copy on a row's own bytes and input copies (one repeat set), or a note where the backend cannot hold them. */
  const sizedCopy = async (label: string, bytes: number): Promise<number | undefined> => {
    try {
      return (await p.copyAt(best.name, bytes, copiesFor(bytes), repsFor(bytes))).gbs;
    } catch (e) {
      if (!(e instanceof ContractError)) throw e;
      notes.push(`${p.impl} ${label}: no same-size copy: ${e.message.split('\n')[0]}`);
      return undefined;
    }
  };

  /**
   * Times one memory-bound op on one shape and dtype, as a fraction of the best copy, with the same-size copy beside
   * where it has a bandwidth target; or, given `against`, as that row's time over this one's. `always` measures it
   * whatever `only` says (a row others are read against).
   */
  const measureBandwidth = async (row: {
    op: 'fusedNormRopeStacked' | 'ropePoolFused' | 'dequantizeKv';
    dtype: FloatDType;
    shape: Readonly<Record<string, number>>;
    bytes: number;
    make: () => Workload;
    extra: Partial<ResultRow>;
    check: () => Promise<number>;
    always?: boolean;
    against?: { readonly row: ResultRow; readonly label: string };
  }) => {
    const { op, dtype, shape, bytes, extra, against } = row;
    const label = rowLabel(op, dtype, shape, extra.variant);
    if (!row.always && !wanted(label)) return undefined;
    const checkError = await row.check();
    const w = workloadFor(label, row.make);
    if (!w) return undefined;
    const t = await timeRepeated(w.enqueue, repsFor(bytes));
    w.dispose();
    const gbs = bytes / t.us / 1e3;
    const readAs: Pick<ResultRow, 'ceiling' | 'fraction' | 'reference'> = against
      ? { ceiling: against.label, fraction: against.row.us / t.us, reference: { op: against.row.op, impl: against.row.impl, ...(against.row.variant ? { variant: against.row.variant } : {}) } }
      : { ceiling: best.name, fraction: gbs / copy };
    const sizedCopyGbs = extra.target === undefined || against ? undefined : await sizedCopy(label, bytes);
    const measured: ResultRow = { op, impl: p.impl, dtype, shape, ...t, bytes, flops: 0, gbs, tflops: null, ...readAs, ...extra, checkError, ...(sizedCopyGbs === undefined ? {} : { sizedCopyGbs }) };
    rows.push(measured);
    const of = against ? `${(100 * measured.fraction).toFixed(1)}% of ${against.label}'s speed, ${against.row.us.toFixed(2)} µs` : `${((100 * gbs) / copy).toFixed(1)}% of ${best.name}${sizedCopyGbs === undefined ? '' : `; the same-size copy ${sizedCopyGbs.toFixed(0)} GB/s`}`;
    log(`${p.impl}: ${label}: ${t.us.toFixed(2)} µs ±${(100 * (t.spread ?? 0)).toFixed(1)}%, ${gbs.toFixed(0)} GB/s (${of})`);
    return measured;
  };

  const ropePoolCheckShape: RopePoolShape = { N: 256, Hq: 32, H: 8, D: 128, R: 64 };
  for (const dtype of dtypes) {
    const fusedCheck = checker('fusedNormRopeStacked', dtype, (b) => normRopeWorkload(b, { L: 5, H: 8, D: 128, R: 64, T: 256 }, 1, dtype));
    const poolCheck = checker('ropePoolFused', dtype, (b) => ropePoolWorkload(b, ropePoolCheckShape, 1, dtype));
    for (const s of plan.normRope) {
      const bytes = normRopeBytes(s, CACHE_ROWS, dtype);
      const latency = s.T <= SMALL_BATCH ? targets.smallBatchUs : undefined;
      const extra = { ...(s.T >= long ? { target: targets.bandwidth } : {}), ...(latency !== undefined ? { targetUs: latency } : {}) };
      const opMade = wanted(rowLabel('fusedNormRopeStacked', dtype, { ...s }, OP_MADE));
      const callerOutputs = await measureBandwidth({ op: 'fusedNormRopeStacked', dtype, shape: { ...s }, bytes, make: () => normRopeWorkload(p.backend, s, copiesFor(bytes), dtype), extra, check: fusedCheck, always: opMade });
      if (!callerOutputs || !opMade) continue;
      // The README's call form: outputs made by the op each call (and disposed), read against the caller-output row.
      await measureBandwidth({
        op: 'fusedNormRopeStacked',
        dtype,
        shape: { ...s },
        bytes,
        make: () => normRopeWorkload(p.backend, s, copiesFor(bytes), dtype, { opMadeOutputs: true }),
        extra: { variant: OP_MADE, target: targets.opMadeOutputs, ...(latency !== undefined ? { targetUs: latency } : {}) },
        check: fusedCheck,
        against: { row: callerOutputs, label: 'caller outputs' },
      });
    }
    const plainRow = (s: RopePoolShape, always = false) => {
      const bytes = ropePoolBytes(s, dtype);
      const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype);
      const latency = s.N <= SMALL_BATCH ? targets.smallBatchUs : undefined;
      const extra = { ...(s.N >= long ? { target: targets.bandwidth } : {}), ...(latency !== undefined ? { targetUs: latency } : {}) };
      return measureBandwidth({ op: 'ropePoolFused', dtype, shape: { ...s }, bytes, make, extra, check: poolCheck, always });
    };
    for (const s of plan.ropePool) await plainRow(s);
    const longPools = plan.ropePool.filter((x) => x.R === 128 && x.N >= long);
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
      const check = checker(`ropePoolFused (${name})`, dtype, (b) => ropePoolWorkload(b, ropePoolCheckShape, 1, dtype, variant));
      for (const s of longPools) {
        const bytes = ropePoolBytes(s, dtype, variant);
        const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype, variant);
        await measureBandwidth({ op: 'ropePoolFused', dtype, shape: { ...s }, bytes, make, extra: { variant: name, target: targets.bandwidth }, check });
      }
    }
    // Scaled RoPE, bf16 as served: each row against the plain row of its shape, timed in this run (and here, if `only` left it out).
    if (dtype !== 'bf16') continue;
    // The read side of the same pools, into bf16 rows: every pool kind, with the bandwidth target.
    for (const [name, variant] of materializeIntoPools) {
      const check = checker(`dequantizeKv (${name})`, dtype, (b) => dequantizeKvWorkload(b, { ...ropePoolCheckShape, N: 64 }, 1, dtype, variant));
      for (const s of longPools) {
        const shape = { N: s.N, H: s.H, D: s.D };
        const bytes = dequantizeKvBytes(s, dtype, variant);
        const make = () => dequantizeKvWorkload(p.backend, s, copiesFor(bytes), dtype, variant);
        await measureBandwidth({ op: 'dequantizeKv', dtype, shape, bytes, make, extra: { variant: name, target: targets.bandwidth }, check });
      }
    }
    for (const [name, rope] of scaledRope) {
      const variant: RopePoolVariant = { rope };
      const check = checker(`ropePoolFused (${name})`, dtype, (b) => ropePoolWorkload(b, { ...ropePoolCheckShape, R: 128 }, 1, dtype, variant));
      for (const s of longPools) {
        if (!wanted(rowLabel('ropePoolFused', dtype, { ...s }, name))) continue;
        const plainLabel = rowLabel('ropePoolFused', dtype, { ...s });
        const plain = rows.find((r) => r.impl === p.impl && rowLabel(r.op, r.dtype, r.shape, r.variant) === plainLabel) ?? (await plainRow(s, true));
        if (!plain) continue; // the plain row was refused by the backend, with its note
        const bytes = ropePoolBytes(s, dtype, variant);
        const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype, variant);
        await measureBandwidth({ op: 'ropePoolFused', dtype, shape: { ...s }, bytes, make, extra: { variant: name, target: targets.scaledRope }, check, against: { row: plain, label: 'plain ropePoolFused' } });
      }
    }
  }

  const checkModel = { L: 2, H: 8, D: 128, R: 128, T: 16, hidden: 1024 } as MaterializeShape;
  const materializeCheck = checker('materialize', 'bf16', (b) => materializeWorkload(b, checkModel, 1));
  const intoChecks = new Map(materializeIntoPools.map(([name, pool]) => [name, checker(`materializeInto (${name})`, 'bf16', (b) => materializeIntoWorkload(b, checkModel, 1, pool))]));
  for (const s of plan.materialize) {
    const wantFused = wanted(rowLabel('materialize', 'bf16', { ...s }));
    // materializeInto always runs the projection too: like materialize, it is read against the projection alone.
    const intoPools = s.T >= long ? materializeIntoPools.filter(([name]) => wanted(rowLabel('materializeInto', 'bf16', { ...s }, name))) : [];
    if (!wantFused && intoPools.length === 0) continue;
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
      ...(targets.gemm && s.T >= long ? { target: targets.gemm } : {}),
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
      });
      log(`${p.impl}: own GEMM T=${s.T}: ${own.us.toFixed(1)} µs, ${(flops / own.us / 1e6).toFixed(0)} TFLOP/s (${((100 * gemm.us) / own.us).toFixed(1)}% of ${gemm.engine})`);
    }
    const inputBytes = s.T * s.hidden * 2;
    /** One end-to-end row (the projection included), read against the projection alone. */
    const endToEnd = async (op: 'materialize' | 'materializeInto', make: () => Workload, extra: Partial<ResultRow>) => {
      const w = make();
      const t = await timeRepeated(w.enqueue, repsFor(inputBytes + flops / 100));
      w.dispose();
      rows.push({
        op,
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
        ...(targets.materialize && s.T >= long ? { target: targets.materialize } : {}),
        ...extra,
      });
      return t;
    };
    if (wantFused) {
      const t = await endToEnd('materialize', () => materializeWorkload(p.backend, s, copiesFor(inputBytes)), { checkError: await materializeCheck() });
      log(`${p.impl}: materialize T=${s.T} hidden=${s.hidden}: ${t.us.toFixed(1)} µs end to end, projection alone ${gemm.us.toFixed(1)} µs (${tflops.toFixed(0)} TFLOP/s, ${gemm.engine})`);
    }
    for (const [name, pool] of intoPools) {
      // The bytes are what it must move at least, pools at their stored size; the time beyond the projection is logged beside them.
      const bytes = materializeIntoBytes(s, CACHE_ROWS, pool);
      const t = await endToEnd('materializeInto', () => materializeIntoWorkload(p.backend, s, copiesFor(inputBytes), pool), { variant: name, bytes, checkError: await intoChecks.get(name)!() });
      log(`${p.impl}: ${rowLabel('materializeInto', 'bf16', { ...s }, name)}: ${t.us.toFixed(1)} µs end to end, ${(t.us - gemm.us).toFixed(1)} µs beyond the projection alone (${gemm.us.toFixed(1)} µs); ${(bytes / 1e6).toFixed(0)} MB moved at least`);
    }
  }
  return { ceilings, rows, notes };
}
