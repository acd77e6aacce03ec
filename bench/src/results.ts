/** What one benchmark run writes to bench/results/<date>-<gpu>.json; the docs site charts these files. */
export interface Ceiling {
  readonly name: string;
  readonly backend: string;
  readonly unit: 'GB/s' | 'TFLOP/s';
  readonly value: number;
  readonly shape?: Readonly<Record<string, number>>;
}

export interface ResultRow {
  readonly op: 'fusedNormRopeStacked' | 'ropePoolFused' | 'materialize' | 'projection';
  /** kvkit-cuda, kvkit-webgpu, or a peer: torch-eager, sglang-triton, cublas. */
  readonly impl: string;
  readonly dtype: 'bf16';
  readonly shape: Readonly<Record<string, number>>;
  /** Median device time of one call. */
  readonly us: number;
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
  /** The row of the same run, shape and dtype whose time this row's is compared with: fraction = its `us` / this `us`. */
  readonly reference?: RowReference;
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
}

export interface BenchResults {
  readonly schema: 1;
  readonly date: string;
  readonly gpu: string;
  readonly driver: string;
  readonly notes: readonly string[];
  readonly ceilings: readonly Ceiling[];
  readonly rows: readonly ResultRow[];
}

const shapeText = (shape: Readonly<Record<string, number>>) =>
  Object.entries(shape)
    .map(([k, v]) => `${k}=${v}`)
    .join(' ');

const fixed = (x: number | null, digits: number) => (x === null ? '' : x.toFixed(digits));

export function markdownTable(r: BenchResults): string {
  const lines = [
    `# kvkit benchmarks: ${r.gpu}, ${r.date}`,
    '',
    `Driver ${r.driver}. Every figure is a median of device time; each fraction is against a ceiling measured in the same run.`,
    '',
    '| ceiling | backend | value |',
    '| --- | --- | --- |',
    ...r.ceilings.map((c) => `| ${c.name} | ${c.backend} | ${c.value.toFixed(c.unit === 'GB/s' ? 0 : 1)} ${c.unit} |`),
    '',
    '| op | shape | impl | µs | GB/s | TFLOP/s | fraction | of | target |',
    '| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |',
    ...r.rows.map(
      (w) =>
        `| ${w.op} | ${shapeText(w.shape)} | ${w.impl} | ${w.us.toFixed(2)} | ${fixed(w.gbs, 0)} | ${fixed(w.tflops, 1)} | ${(100 * w.fraction).toFixed(1)}% | ${w.ceiling} | ${w.target === undefined ? '' : `${(100 * w.target).toFixed(0)}%`} |`,
    ),
  ];
  if (r.notes.length) lines.push('', ...r.notes.map((n) => `- ${n}`));
  return `${lines.join('\n')}\n`;
}
