import { hostIoTable } from './hostIo.js';
import type { HostIoRow } from './hostIo.js';

/** What one benchmark run writes to bench/results/<date>-<gpu>.json; the docs site charts these files. */
export interface Ceiling {
  readonly name: string;
  readonly backend: string;
  readonly unit: 'GB/s' | 'TFLOP/s';
  readonly value: number;
  readonly shape?: Readonly<Record<string, number>>;
  /** Set on the copy ceiling a backend's memory-bound rows are read against: the best of its copies in this run. */
  readonly best?: true;
}

export interface ResultRow {
  readonly op: 'fusedNormRopeStacked' | 'ropePoolFused' | 'dequantizeKv' | 'pagedAttention' | 'copySlots' | 'materialize' | 'materializeInto' | 'projection' | 'mlaPoolFused';
  /** kvkit-cuda, kvkit-webgpu, or a peer: torch-eager, sglang-triton, cublas. */
  readonly impl: string;
  readonly dtype: 'f32' | 'f16' | 'bf16';
  readonly shape: Readonly<Record<string, number>>;
  /** What the op runs beyond its plain form (e.g. `qk-norm`), where it does. */
  readonly variant?: string;
  /** Device time of one call: the median of the repeats' medians. */
  readonly us: number;
  /** Each repeat's median device time, measured one after the other in the same run. */
  readonly repeatsUs?: readonly number[];
  /** The largest distance of a repeat from their median, as a fraction of it: ±5% reads 0.05. */
  readonly spread?: number;
  readonly bytes: number;
  readonly flops: number;
  readonly gbs: number | null;
  readonly tflops: number | null;
  /**
   * What the fraction is against: the name of a ceiling of the same run, or, where `reference` is set, a label
   * for that row (e.g. `projection alone (cublas)`).
   */
  readonly ceiling: string;
  readonly fraction: number;
  /**
   * The row of the same run, shape and dtype whose time this row's is compared with: fraction = its `us` / this `us`
   * (a scaled-RoPE row against plain RoPE, materialize and materializeInto against the projection alone).
   */
  readonly reference?: RowReference;
  /**
   * Memory-bound rows read against the best copy: that copy run on this row's own byte count (half read, half
   * written), rotated over as many buffers as the row's inputs, in GB/s. The target stays against the large copy;
   * this says how much of the gap is the problem's size.
   */
  readonly sizedCopyGbs?: number;
  /** The plan's target for this fraction, where it sets one. */
  readonly target?: number;
  /** For latency targets: the most device time the plan allows. */
  readonly targetUs?: number;
  /** Relative L2 error of this op against the CPU reference, measured before timing on a small shape. */
  readonly checkError?: number;
  readonly method?: string;
}

/** Names one row of a run; with the referring row's shape and dtype it picks exactly one. */
export interface RowReference {
  readonly op: ResultRow['op'];
  readonly impl: string;
  /** The referred row's variant; none names the plain form. */
  readonly variant?: string;
}

export interface BenchResults {
  readonly schema: 1;
  readonly date: string;
  readonly gpu: string;
  readonly driver: string;
  readonly notes: readonly string[];
  readonly ceilings: readonly Ceiling[];
  readonly rows: readonly ResultRow[];
  /** tensor() and read() per dtype, GB/s of host data, per backend. */
  readonly hostIo?: readonly HostIoRow[];
}

const shapeText = (shape: Readonly<Record<string, number>>) =>
  Object.entries(shape)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

const fixed = (x: number | null, digits: number) => (x === null ? '' : x.toFixed(digits));

const targetText = (w: ResultRow) =>
  [w.target === undefined ? '' : `≥ ${(100 * w.target).toFixed(0)}%`, w.targetUs === undefined ? '' : `≤ ${w.targetUs} µs`].filter(Boolean).join(', ');

/**
 * Whether a row meets every target it carries: the share (of the same-size
 * copy where the row has one, a copy of its own bytes being its ceiling; else
 * its fraction), and the latency bound where one is set.
 */
export function meetsTargets(w: ResultRow): boolean | undefined {
  if (w.target === undefined && w.targetUs === undefined) return undefined;
  const share = w.sizedCopyGbs !== undefined && w.gbs !== null ? w.gbs / w.sizedCopyGbs : w.fraction;
  return (w.target === undefined || share >= w.target) && (w.targetUs === undefined || w.us <= w.targetUs);
}

const metText = (w: ResultRow) => {
  const met = meetsTargets(w);
  return met === undefined ? '' : met ? 'yes' : 'no';
};

const sameShape = (a: Readonly<Record<string, number>>, b: Readonly<Record<string, number>>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

/** The row `w.reference` names among `rows`: same op, impl and variant (none: the plain form), dtype and shape; undefined unless exactly one. */
export function referencedRow(rows: readonly ResultRow[], w: ResultRow): ResultRow | undefined {
  const ref = w.reference;
  if (!ref) return undefined;
  const found = rows.filter((r) => r.op === ref.op && r.impl === ref.impl && r.variant === ref.variant && r.dtype === w.dtype && sameShape(r.shape, w.shape));
  return found.length === 1 ? found[0] : undefined;
}

/** What the fraction is of: the ceiling, or the referenced row with its time. */
const ofText = (rows: readonly ResultRow[], w: ResultRow) => {
  const ref = referencedRow(rows, w);
  return ref ? `${w.ceiling}, ${ref.us.toFixed(2)} µs` : w.ceiling;
};

/** The same-size copy's GB/s and the share of it this row reached. */
const sizedCopyText = (w: ResultRow) => (w.sizedCopyGbs === undefined || w.gbs === null ? '' : `${w.sizedCopyGbs.toFixed(0)} (${((100 * w.gbs) / w.sizedCopyGbs).toFixed(1)}%)`);

export function markdownTable(r: BenchResults): string {
  const lines = [
    `# kvkit benchmarks: ${r.gpu}, ${r.date}`,
    '',
    `Driver ${r.driver}. Every figure is a median of device time; each fraction is against a ceiling measured in the same run, or against the row it names (that row's µs over this row's).`,
    "Same-size copy: the best copy on the row's own byte count, rotated like its inputs, and the row's share of it; a bandwidth target is held to that share.",
    '',
    '| ceiling | backend | value |',
    '| --- | --- | --- |',
    ...r.ceilings.map((c) => `| ${c.name} | ${c.backend} | ${c.value.toFixed(c.unit === 'GB/s' ? 0 : 1)} ${c.unit} |`),
    '',
    '| op | dtype | shape | impl | µs | spread | GB/s | TFLOP/s | fraction | of | target | met | same-size copy GB/s (row) |',
    '| --- | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- | ---: |',
    ...r.rows.map(
      (w) =>
        `| ${w.op}${w.variant ? ` (${w.variant})` : ''} | ${w.dtype} | ${shapeText(w.shape)} | ${w.impl} | ${w.us.toFixed(2)} | ${w.spread === undefined ? '' : `±${(100 * w.spread).toFixed(1)}%`} | ${fixed(w.gbs, 0)} | ${fixed(w.tflops, 1)} | ${(100 * w.fraction).toFixed(1)}% | ${ofText(r.rows, w)} | ${targetText(w)} | ${metText(w)} | ${sizedCopyText(w)} |`,
    ),
  ];
  if (r.hostIo?.length) lines.push('', '## Host I/O', '', hostIoTable(r.hostIo).trimEnd());
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return `${lines.join('\n')}\n`;
}
