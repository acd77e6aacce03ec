import type { Backend, FloatDType } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import type { DeviceTiming, GemmTiming, Profiler } from './profilers.js';
import type { Ceiling, ResultRow } from './results.js';
import { benchPlan, scaledRope } from './shapes.js';
import type { BenchPlan, MaterializeShape, PagedShape, RopePoolShape } from './shapes.js';
import { copySlotsBytes, dequantizeKvBytes, materializeIntoBytes, mlaPoolBytes, normRopeBytes, pagedAttentionBytes, projectionFlops, ropePoolBytes } from './traffic.js';
import {
  CACHE_ROWS,
  copiesFor,
  copySlotsWorkload,
  dequantizeKvWorkload,
  materializeIntoWorkload,
  materializeWorkload,
  mlaPoolWorkload,
  normRopeWorkload,
  pagedAttentionWorkload,
  pagedPoolSlots,
  ropePoolWorkload,
  SharedInputs,
} from './workloads.js';
import type { MlaVariant, PagedVariant, PoolVariant, RopePoolVariant, Workload } from './workloads.js';

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
  /** pagedAttention decode (64 requests × 4096 tokens, every pool kind, scattered slots), against the same-size copy. */
  readonly pagedDecode: number;
  /** pagedAttention of one request of 131072 tokens, against the same-size copy. */
  readonly pagedLong: number;
  /** Decode time / verification time (8 queries a request over the same requests): at most 1.3× the decode row's. */
  readonly verification: number;
}

// The package's own CUDA GEMM keeps no target: cuBLASLt runs the projection wherever CUDA is; its rows are there to read.
const TARGETS: Record<string, Targets> = {
  'kvkit-cuda': { bandwidth: 0.9, smallBatchUs: 5, materialize: 1 / 1.05, scaledRope: 1 / 1.05, opMadeOutputs: 1 / 1.05, pagedDecode: 0.85, pagedLong: 0.8, verification: 1 / 1.3 },
  'kvkit-webgpu': { bandwidth: 0.85, smallBatchUs: 12, gemm: 0.5, scaledRope: 1 / 1.05, opMadeOutputs: 1 / 1.05, pagedDecode: 0.7, pagedLong: 0.6, verification: 1 / 1.3 },
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

/** Device time one repeat samples, about: its sample count is sized to it. */
const REPEAT_DEVICE_US = 1000;
/** A call is taken to last at least this long where its bytes say less (launch and check costs). */
const LEAST_CALL_US = 5;

/**
 * Samples in one repeat of a row whose call takes about `callUs` of device time: as many as fill REPEAT_DEVICE_US
 * with `callsPerSample` calls each, at least 5 and at most 100. Small calls get many samples (on CUDA, where each
 * sample also waits out a spin of three times the host's enqueue time, 20 of 10 calls), large ones five.
 */
export function samplesFor(callUs: number, callsPerSample = 1): number {
  return Math.min(100, Math.max(5, Math.ceil(REPEAT_DEVICE_US / (callsPerSample * Math.max(callUs, LEAST_CALL_US)))));
}

/** Warm-up calls before each repeat: the first after the workload was made, one before the others (the same calls just ran). */
export const warmupFor = (repeat: number) => (repeat === 0 ? 3 : 1);

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
  const targets = TARGETS[p.impl] ?? { bandwidth: 0, scaledRope: 0, opMadeOutputs: 0, pagedDecode: 0, pagedLong: 0, verification: 0 };
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
    for (let r = 0; r < REPEATS; r++) timings.push(await p.time(enqueue, reps, warmupFor(r)));
    return summariseRepeats(timings);
  };
  /** Samples a repeat of a memory-bound row of `bytes` takes: its call as long as the best copy of those bytes, at least. */
  const samples = (bytes: number) => samplesFor(bytes / copy / 1e3, p.callsPerSample);
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
      return (await p.copyAt(best.name, bytes, copiesFor(bytes), samples(bytes))).gbs;
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
    op: 'fusedNormRopeStacked' | 'ropePoolFused' | 'dequantizeKv' | 'pagedAttention' | 'copySlots' | 'mlaPoolFused';
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
    const started = performance.now();
    const checkError = await row.check();
    const w = workloadFor(label, row.make);
    if (!w) return undefined;
    const t = await timeRepeated(w.enqueue, samples(bytes));
    w.dispose();
    const gbs = bytes / t.us / 1e3;
    const readAs: Pick<ResultRow, 'ceiling' | 'fraction' | 'reference'> = against
      ? { ceiling: against.label, fraction: against.row.us / t.us, reference: { op: against.row.op, impl: against.row.impl, ...(against.row.variant ? { variant: against.row.variant } : {}) } }
      : { ceiling: best.name, fraction: gbs / copy };
    const sizedCopyGbs = extra.target === undefined || against ? undefined : await sizedCopy(label, bytes);
    const measured: ResultRow = { op, impl: p.impl, dtype, shape, ...t, bytes, flops: 0, gbs, tflops: null, ...readAs, ...extra, checkError, ...(sizedCopyGbs === undefined ? {} : { sizedCopyGbs }) };
    rows.push(measured);
    const of = against ? `${(100 * measured.fraction).toFixed(1)}% of ${against.label}'s speed, ${against.row.us.toFixed(2)} µs` : `${((100 * gbs) / copy).toFixed(1)}% of ${best.name}${sizedCopyGbs === undefined ? '' : `; the same-size copy ${sizedCopyGbs.toFixed(0)} GB/s`}`;
    // The wall time of the row (its check, uploads, repeats and same-size copy) closes the line.
    log(`${p.impl}: ${label}: ${t.us.toFixed(2)} µs ±${(100 * (t.spread ?? 0)).toFixed(1)}%, ${gbs.toFixed(0)} GB/s (${of}) [${((performance.now() - started) / 1e3).toFixed(2)} s]`);
    return measured;
  };

  const ropePoolCheckShape: RopePoolShape = { N: 256, Hq: 32, H: 8, D: 128, R: 64 };
  // The inputs a dtype's rows share (kv of each fused shape, q/k/v of each token count), freed when the next dtype starts.
  const shared = new SharedInputs(p.backend);
  for (const dtype of dtypes) {
    shared.dispose();
    // f16 and f32 run the plan's `otherDtypes` shapes, plain rows only, where it names them: bf16 is what is served.
    const other = dtype !== 'bf16' ? plan.otherDtypes : undefined;
    const fusedCheck = checker('fusedNormRopeStacked', dtype, (b) => normRopeWorkload(b, { L: 5, H: 8, D: 128, R: 64, T: 256 }, 1, dtype));
    const poolCheck = checker('ropePoolFused', dtype, (b) => ropePoolWorkload(b, ropePoolCheckShape, 1, dtype));
    for (const s of other ? other.normRope : plan.normRope) {
      const bytes = normRopeBytes(s, CACHE_ROWS, dtype);
      const latency = s.T <= SMALL_BATCH ? targets.smallBatchUs : undefined;
      const extra = { ...(s.T >= long ? { target: targets.bandwidth } : {}), ...(latency !== undefined ? { targetUs: latency } : {}) };
      const opMade = !other && wanted(rowLabel('fusedNormRopeStacked', dtype, { ...s }, OP_MADE));
      const callerOutputs = await measureBandwidth({ op: 'fusedNormRopeStacked', dtype, shape: { ...s }, bytes, make: () => normRopeWorkload(p.backend, s, copiesFor(bytes), dtype, { shared }), extra, check: fusedCheck, always: opMade });
      if (!callerOutputs || !opMade) continue;
      // The README's call form: outputs made by the op each call (and disposed), read against the caller-output row.
      await measureBandwidth({
        op: 'fusedNormRopeStacked',
        dtype,
        shape: { ...s },
        bytes,
        make: () => normRopeWorkload(p.backend, s, copiesFor(bytes), dtype, { opMadeOutputs: true, shared }),
        extra: { variant: OP_MADE, target: targets.opMadeOutputs, ...(latency !== undefined ? { targetUs: latency } : {}) },
        check: fusedCheck,
        against: { row: callerOutputs, label: 'caller outputs' },
      });
    }
    const plainRow = (s: RopePoolShape, always = false) => {
      const bytes = ropePoolBytes(s, dtype);
      const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype, {}, shared);
      const latency = s.N <= SMALL_BATCH ? targets.smallBatchUs : undefined;
      const extra = { ...(s.N >= long ? { target: targets.bandwidth } : {}), ...(latency !== undefined ? { targetUs: latency } : {}) };
      return measureBandwidth({ op: 'ropePoolFused', dtype, shape: { ...s }, bytes, make, extra, check: poolCheck, always });
    };
    for (const s of other ? other.ropePool : plan.ropePool) await plainRow(s);
    const longPools = other ? [] : plan.ropePool.filter((x) => x.R === 128 && x.N >= long);
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
        const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype, variant, shared);
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
        const make = () => ropePoolWorkload(p.backend, s, copiesFor(bytes), dtype, variant, shared);
        await measureBandwidth({ op: 'ropePoolFused', dtype, shape: { ...s }, bytes, make, extra: { variant: name, target: targets.scaledRope }, check, against: { row: plain, label: 'plain ropePoolFused' } });
      }
    }
  }

  shared.dispose();

  // mlaPoolFused, bf16 as served: into a bf16 and an fp8e4m3 latent pool, with the bandwidth target.
  if (plan.mlaPool && dtypes.includes('bf16')) {
    const dtype = 'bf16' as const;
    const mlaRows: [string | undefined, MlaVariant][] = [
      [undefined, {}],
      ['fp8e4m3 pool', { poolDtype: 'fp8e4m3' }],
      // The latent rows alone: what the op's time is, less the query heads' copy and rotation.
      ['latent rows only, no q', { withoutQuery: true }],
    ];
    for (const [name, variant] of mlaRows) {
      const check = checker(`mlaPoolFused${name ? ` (${name})` : ''}`, dtype, (b) => mlaPoolWorkload(b, { ...plan.mlaPool![0]!, N: 64 }, 1, dtype, variant));
      for (const s of plan.mlaPool) {
        const bytes = mlaPoolBytes(s, dtype, variant);
        const make = () => mlaPoolWorkload(p.backend, s, copiesFor(bytes), dtype, variant);
        await measureBandwidth({ op: 'mlaPoolFused', dtype, shape: { ...s }, bytes, make, extra: { ...(name ? { variant: name } : {}), ...(s.N >= long ? { target: targets.bandwidth } : {}) }, check });
      }
    }
  }

  // pagedAttention and copySlots, bf16, all on one pair of pools of each dtype (shared, made once); a backend whose
  // `ops` lacks an op skips its rows with a note.
  if (plan.paged && dtypes.includes('bf16')) {
    const paged = plan.paged;
    const dtype = 'bf16' as const;
    const poolSlots = pagedPoolSlots([paged.decode, paged.long]);
    const pagedLabel = (s: PagedShape, variant?: string) => rowLabel('pagedAttention', dtype, { ...s }, variant);
    const verification = `verification, ${paged.verifyQueries} queries`;
    // Decode over each pool kind, then each request's slots scattered over the pool: the same-size copy target.
    const decodeRows: [string | undefined, PagedVariant][] = [
      [undefined, {}],
      ['HND pool', { layout: 'HND' }],
      ['fp8e4m3 pool', { poolDtype: 'fp8e4m3' }],
      ['fp8e4m3 HND pool', { poolDtype: 'fp8e4m3', layout: 'HND' }],
      ['scattered slots', { scattered: true }],
    ];
    const copyRows: [string | undefined, { dstPoolDtype?: 'fp8e4m3' }][] = [
      [undefined, {}],
      ['to fp8e4m3 pool', { dstPoolDtype: 'fp8e4m3' }],
    ];
    /** Whether the backend runs `op` where a row of it is wanted; a note says so where it does not. */
    const runs = (op: 'pagedAttention' | 'copySlots', labels: readonly string[]) => {
      if (!labels.some(wanted)) return false;
      if (p.backend.ops.includes(op)) return true;
      const note = `${p.impl} ${op}: not measured: the backend does not run it yet (backend.ops lacks it)`;
      notes.push(note);
      log(note);
      return false;
    };
    const pagedRow = async (s: PagedShape, name: string | undefined, variant: PagedVariant, extra: Partial<ResultRow>, check: () => Promise<number>, opts: { always?: boolean; against?: { readonly row: ResultRow; readonly label: string } } = {}) => {
      const bytes = pagedAttentionBytes(s, variant.qLen ?? 1, dtype, variant);
      const make = () => pagedAttentionWorkload(p.backend, s, copiesFor(bytes), variant, { poolSlots, shared });
      return measureBandwidth({ op: 'pagedAttention', dtype, shape: { ...s }, bytes, make, extra: { ...(name ? { variant: name } : {}), ...extra }, check, ...opts });
    };
    try {
      const attentionLabels = [...decodeRows.map(([name]) => pagedLabel(paged.decode, name)), pagedLabel(paged.decode, verification), pagedLabel(paged.long)];
      if (runs('pagedAttention', attentionLabels)) {
        const checkShape: PagedShape = { ...paged.decode, B: 3, kvLen: 37 };
        const checkFor = (what: string | undefined, variant: PagedVariant, s = checkShape) =>
          checker(`pagedAttention${what ? ` (${what})` : ''}`, dtype, (b) => pagedAttentionWorkload(b, s, 1, variant));
        let decode: ResultRow | undefined;
        for (const [name, variant] of decodeRows) {
          // The plain decode row is the one verification is read against: measured whenever that row is.
          const always = name === undefined && wanted(pagedLabel(paged.decode, verification));
          const row = await pagedRow(paged.decode, name, variant, { target: targets.pagedDecode }, checkFor(name, variant), { always });
          if (name === undefined) decode = row;
        }
        if (decode && wanted(pagedLabel(paged.decode, verification))) {
          const variant: PagedVariant = { qLen: paged.verifyQueries };
          await pagedRow(paged.decode, verification, variant, { target: targets.verification }, checkFor(verification, variant), { against: { row: decode, label: 'decode' } });
        }
        // One request split over many pieces: its check too (a request of 1000 tokens is split on WebGPU).
        await pagedRow(paged.long, undefined, {}, { target: targets.pagedLong }, checkFor('one long request', {}, { ...paged.long, kvLen: 1000 }));
      }
      const copyLabels = paged.copySlots.flatMap((s) => copyRows.map(([name]) => rowLabel('copySlots', dtype, { ...s }, name)));
      if (runs('copySlots', copyLabels)) {
        for (const [name, variant] of copyRows) {
          const check = checker(`copySlots${name ? ` (${name})` : ''}`, dtype, (b) => copySlotsWorkload(b, { ...paged.copySlots[0]!, M: 40 }, 1, variant));
          for (const s of paged.copySlots) {
            const bytes = copySlotsBytes(s, dtype, variant);
            const make = () => copySlotsWorkload(p.backend, s, copiesFor(bytes), variant, { poolSlots, shared });
            await measureBandwidth({ op: 'copySlots', dtype, shape: { ...s }, bytes, make, extra: { ...(name ? { variant: name } : {}), target: targets.bandwidth }, check });
          }
        }
      }
    } finally {
      shared.dispose();
    }
  }

  const checkModel = { L: 2, H: 8, D: 128, R: 128, T: 16, hidden: 1024 } as MaterializeShape;
  const materializeCheck = checker('materialize', 'bf16', (b) => materializeWorkload(b, checkModel, 1));
  const intoChecks = new Map(materializeIntoPools.map(([name, pool]) => [name, checker(`materializeInto (${name})`, 'bf16', (b) => materializeIntoWorkload(b, checkModel, 1, pool))]));
  /** The check of a schedule's row (materialize, or materializeInto into one pool), once; called with that schedule set. */
  const scheduleChecks = new Map<string, () => Promise<number>>();
  const scheduleCheck = (variant: string, pool: PoolVariant | undefined) => {
    const what = `${pool ? 'materializeInto' : 'materialize'} (${variant})`;
    if (!scheduleChecks.has(what)) scheduleChecks.set(what, checker(what, 'bf16', (b) => (pool ? materializeIntoWorkload(b, checkModel, 1, pool) : materializeWorkload(b, checkModel, 1))));
    return scheduleChecks.get(what)!();
  };
  for (const s of plan.materialize) {
    const wantFused = wanted(rowLabel('materialize', 'bf16', { ...s }));
    // materializeInto always runs the projection too: like materialize, it is read against the projection alone.
    const intoPools = s.T >= long ? materializeIntoPools.filter(([name]) => wanted(rowLabel('materializeInto', 'bf16', { ...s }, name))) : [];
    // The materializer's other schedules at the long token counts: each row again as a variant, against the same projection.
    const scheduled = (s.T >= long ? (p.materializerSchedules?.others() ?? []) : []).flatMap((schedule) => [
      ...(wanted(rowLabel('materialize', 'bf16', { ...s }, schedule)) ? [{ schedule, variant: schedule, pool: undefined }] : []),
      ...materializeIntoPools.map(([name, pool]) => ({ schedule, variant: `${name}, ${schedule}`, pool })).filter((r) => wanted(rowLabel('materializeInto', 'bf16', { ...s }, r.variant))),
    ]);
    if (!wantFused && intoPools.length === 0 && scheduled.length === 0) continue;
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
      // The projection alone bounds the call from below: its samples as many as its time says.
      const t = await timeRepeated(w.enqueue, samplesFor(gemm.us, p.callsPerSample));
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
      const t = await endToEnd('materialize', () => materializeWorkload(p.backend, s, copiesFor(inputBytes), shared), { checkError: await materializeCheck() });
      log(`${p.impl}: materialize T=${s.T} hidden=${s.hidden}: ${t.us.toFixed(1)} µs end to end, projection alone ${gemm.us.toFixed(1)} µs (${tflops.toFixed(0)} TFLOP/s, ${gemm.engine})`);
    }
    for (const [name, pool] of intoPools) {
      // The bytes are what it must move at least, pools at their stored size; the time beyond the projection is logged beside them.
      const bytes = materializeIntoBytes(s, CACHE_ROWS, pool);
      const t = await endToEnd('materializeInto', () => materializeIntoWorkload(p.backend, s, copiesFor(inputBytes), pool, shared), { variant: name, bytes, checkError: await intoChecks.get(name)!() });
      log(`${p.impl}: ${rowLabel('materializeInto', 'bf16', { ...s }, name)}: ${t.us.toFixed(1)} µs end to end, ${(t.us - gemm.us).toFixed(1)} µs beyond the projection alone (${gemm.us.toFixed(1)} µs); ${(bytes / 1e6).toFixed(0)} MB moved at least`);
    }
    for (const { schedule, variant, pool } of scheduled) {
      const op = pool ? 'materializeInto' : 'materialize';
      // Checked and timed with the schedule set; the default is back for the rows after.
      const t = await p.materializerSchedules!.run(schedule, async () => {
        const checkError = await scheduleCheck(variant, pool);
        const make = () => (pool ? materializeIntoWorkload(p.backend, s, copiesFor(inputBytes), pool, shared) : materializeWorkload(p.backend, s, copiesFor(inputBytes), shared));
        return endToEnd(op, make, { variant, checkError, ...(pool ? { bytes: materializeIntoBytes(s, CACHE_ROWS, pool) } : {}) });
      });
      log(`${p.impl}: ${rowLabel(op, 'bf16', { ...s }, variant)}: ${t.us.toFixed(1)} µs end to end, ${((100 * gemm.us) / t.us).toFixed(1)}% of the projection alone's speed (${gemm.us.toFixed(1)} µs)`);
    }
  }
  // The draft model's weights and each T's hidden states, shared by that T's materialize and materializeInto rows.
  shared.dispose();
  return { ceilings, rows, notes };
}
