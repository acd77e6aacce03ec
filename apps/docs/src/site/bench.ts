import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** One benchmark run as bench/ writes it (`bench/results/<date>-<gpu>.json`, schema 1). */
export interface BenchRun {
  file: string;
  schema: 1;
  date: string;
  gpu: string;
  driver: string;
  notes: string[];
  ceilings: BenchCeiling[];
  rows: BenchRow[];
  /** tensor() / read() throughput per backend and dtype, where the run measured it. */
  hostIo: BenchHostIo[];
}

export interface BenchHostIo {
  backend: string;
  what: string;
  dtype: string;
  host: string;
  /** GB/s of host data: median, fastest and slowest of the repeats. */
  gbs: { median: number; min: number; max: number };
}

export interface BenchCeiling {
  name: string;
  backend: string;
  unit: string;
  value: number;
  shape?: Record<string, number>;
  /** The copy this backend's memory-bound rows are read against: the best of its copies in the run. */
  best?: boolean;
}

export interface BenchRow {
  op: string;
  impl: string;
  dtype: string;
  shape: Record<string, number>;
  us: number;
  bytes: number;
  flops: number;
  gbs: number | null;
  tflops: number | null;
  /** A ceiling of the run, or where `reference` is set, the label of that row. */
  ceiling: string;
  fraction: number;
  /** The row of the same run, shape and dtype this one is a fraction of (its `us` over this row's). */
  reference?: { op: string; impl: string; variant?: string };
  /** What the op runs beyond its plain form (e.g. `qk-norm`), where it does. */
  variant?: string;
  /** Each repeat's median time, and the largest relative distance of one from their median. */
  repeatsUs?: number[];
  spread?: number;
  /** The plan's targets where it sets them: a fraction, and a most device time. */
  target?: number;
  targetUs?: number;
  /** The best copy timed on this row's own bytes and input copies, GB/s (memory-bound rows with a bandwidth target). */
  sizedCopyGbs?: number;
}

export interface BenchResults {
  runs: BenchRun[];
  /** Files left out, with why (a newer schema this site does not know yet). */
  skipped: { file: string; reason: string }[];
}

/** Every `*.json` in `dir`, newest run first. A missing or empty folder is "no results yet"; a malformed schema-1 file fails the build. */
export function loadBenchResults(dir: string): BenchResults {
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
  } catch {
    return { runs: [], skipped: [] };
  }
  const runs: BenchRun[] = [];
  const skipped: BenchResults['skipped'] = [];
  for (const file of files) {
    const raw = JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, unknown>;
    if (raw.schema !== 1) {
      skipped.push({ file, reason: `schema ${JSON.stringify(raw.schema)} is not one this site reads (1)` });
      continue;
    }
    runs.push(parseRun(file, raw));
  }
  runs.sort((a, b) => b.date.localeCompare(a.date) || a.file.localeCompare(b.file));
  return { runs, skipped };
}

function parseRun(file: string, raw: Record<string, unknown>): BenchRun {
  const fail = (what: string): never => {
    throw new Error(`bench results ${file}: ${what}`);
  };
  const str = (v: unknown, what: string) => (typeof v === 'string' ? v : fail(`${what} must be a string`));
  const num = (v: unknown, what: string) => (typeof v === 'number' && Number.isFinite(v) ? v : fail(`${what} must be a finite number`));
  const numOrNull = (v: unknown, what: string) => (v === null || v === undefined ? null : num(v, what));
  const shape = (v: unknown, what: string): Record<string, number> => {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(`${what} must be an object of dims`);
    return Object.fromEntries(Object.entries(v).map(([k, d]) => [k, num(d, `${what}.${k}`)]));
  };
  const list = (v: unknown, what: string): unknown[] => (Array.isArray(v) ? v : fail(`${what} must be an array`));
  const obj = (v: unknown, what: string) => (typeof v === 'object' && v !== null ? (v as Record<string, unknown>) : fail(`${what} must be an object`));
  const ceilings = list(raw.ceilings, 'ceilings').map((c, i) => {
    const o = obj(c, `ceilings[${i}]`);
    return {
      name: str(o.name, `ceilings[${i}].name`),
      backend: str(o.backend, `ceilings[${i}].backend`),
      unit: str(o.unit, `ceilings[${i}].unit`),
      value: num(o.value, `ceilings[${i}].value`),
      ...(o.shape === undefined ? {} : { shape: shape(o.shape, `ceilings[${i}].shape`) }),
      ...(o.best === true ? { best: true } : {}),
    };
  });
  const rows = list(raw.rows, 'rows').map((r, i) => {
    const o = obj(r, `rows[${i}]`);
    const row: BenchRow = {
      op: str(o.op, `rows[${i}].op`),
      impl: str(o.impl, `rows[${i}].impl`),
      dtype: str(o.dtype, `rows[${i}].dtype`),
      shape: shape(o.shape, `rows[${i}].shape`),
      us: num(o.us, `rows[${i}].us`),
      bytes: num(o.bytes, `rows[${i}].bytes`),
      flops: num(o.flops, `rows[${i}].flops`),
      gbs: numOrNull(o.gbs, `rows[${i}].gbs`),
      tflops: numOrNull(o.tflops, `rows[${i}].tflops`),
      ceiling: str(o.ceiling, `rows[${i}].ceiling`),
      fraction: num(o.fraction, `rows[${i}].fraction`),
    };
    if (o.variant !== undefined) row.variant = str(o.variant, `rows[${i}].variant`);
    if (o.repeatsUs !== undefined) row.repeatsUs = list(o.repeatsUs, `rows[${i}].repeatsUs`).map((x, j) => num(x, `rows[${i}].repeatsUs[${j}]`));
    if (o.spread !== undefined) row.spread = num(o.spread, `rows[${i}].spread`);
    if (o.target !== undefined) row.target = num(o.target, `rows[${i}].target`);
    if (o.targetUs !== undefined) row.targetUs = num(o.targetUs, `rows[${i}].targetUs`);
    if (o.sizedCopyGbs !== undefined) row.sizedCopyGbs = num(o.sizedCopyGbs, `rows[${i}].sizedCopyGbs`);
    if (o.reference !== undefined) {
      const ref = obj(o.reference, `rows[${i}].reference`);
      row.reference = { op: str(ref.op, `rows[${i}].reference.op`), impl: str(ref.impl, `rows[${i}].reference.impl`), ...(ref.variant === undefined ? {} : { variant: str(ref.variant, `rows[${i}].reference.variant`) }) };
    } else if (!ceilings.some((c) => c.name === row.ceiling)) fail(`rows[${i}].ceiling '${row.ceiling}' is not one of the run's ceilings`);
    return row;
  });
  rows.forEach((row, i) => {
    if (row.reference) checkReference(rows, row, `rows[${i}]`, fail);
  });
  return {
    file,
    schema: 1,
    date: str(raw.date, 'date'),
    gpu: str(raw.gpu, 'gpu'),
    driver: str(raw.driver ?? '', 'driver'),
    notes: list(raw.notes ?? [], 'notes').map((n, i) => str(n, `notes[${i}]`)),
    ceilings,
    rows,
    hostIo: list(raw.hostIo ?? [], 'hostIo').map((h, i) => {
      const o = obj(h, `hostIo[${i}]`);
      const g = obj(o.gbs, `hostIo[${i}].gbs`);
      return {
        backend: str(o.backend, `hostIo[${i}].backend`),
        what: str(o.what, `hostIo[${i}].what`),
        dtype: str(o.dtype, `hostIo[${i}].dtype`),
        host: str(o.host, `hostIo[${i}].host`),
        gbs: { median: num(g.median, `hostIo[${i}].gbs.median`), min: num(g.min, `hostIo[${i}].gbs.min`), max: num(g.max, `hostIo[${i}].gbs.max`) },
      };
    }),
  };
}

/** What a row's target is held to: its share of the same-size copy where it has one (a copy of its own bytes), else its fraction of the ceiling or row it names. */
export function shareOf(row: BenchRow): { value: number; of: string } {
  if (row.sizedCopyGbs !== undefined && row.gbs !== null) return { value: row.gbs / row.sizedCopyGbs, of: 'same-size copy' };
  return { value: row.fraction, of: row.ceiling };
}

/** Whether a row meets the targets it carries (undefined where it carries none): a bandwidth target against the same-size copy where the row has one. */
export function meetsTargets(row: BenchRow): boolean | undefined {
  if (row.target === undefined && row.targetUs === undefined) return undefined;
  return (row.target === undefined || shareOf(row).value >= row.target) && (row.targetUs === undefined || row.us <= row.targetUs);
}

const sameShape = (a: Record<string, number>, b: Record<string, number>) =>
  Object.keys(a).length === Object.keys(b).length && Object.entries(a).every(([k, v]) => b[k] === v);

/** A row measured against another row of the run: exactly one row of its shape and dtype is named, and the fraction is their time ratio. */
function checkReference(rows: BenchRow[], row: BenchRow, at: string, fail: (what: string) => never): void {
  const { op, impl, variant } = row.reference!;
  const found = rows.filter((r) => r.op === op && r.impl === impl && r.variant === variant && r.dtype === row.dtype && sameShape(r.shape, row.shape));
  if (found.length !== 1) fail(`${at}.reference ${op} '${impl}' names ${found.length} rows of its shape and dtype; expected 1`);
  const expected = found[0]!.us / row.us;
  if (Math.abs(row.fraction - expected) > 1e-6 * expected) fail(`${at}.fraction ${row.fraction} is not ${op} '${impl}' time over this row's (${expected})`);
}

/** Our implementations sort before the peers they are measured against. */
export const isOurs = (impl: string): boolean => impl.startsWith('kvkit-');

export interface ChartBar {
  impl: string;
  ours: boolean;
  fraction: number;
  row: BenchRow;
}

export interface ChartPoint {
  /** The token count of the shape (`T`, or `N` for ropePoolFused). */
  tokens: number | undefined;
  label: string;
  bars: ChartBar[];
}

export interface ChartGroup {
  op: string;
  /** The shape apart from the token count, and the dtype. */
  label: string;
  points: ChartPoint[];
}

const TOKEN_DIMS = ['T', 'N'];

/** A run's rows grouped for charting: per op, per shape without its token count, per token count (ascending), ours first. */
export function chartGroups(run: BenchRun): ChartGroup[] {
  const groups = new Map<string, ChartGroup>();
  for (const row of run.rows) {
    const tokenDim = TOKEN_DIMS.find((d) => d in row.shape);
    const rest = Object.entries(row.shape)
      .filter(([k]) => k !== tokenDim)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    const label = `${rest} · ${row.dtype}${row.variant ? ` · ${row.variant}` : ''}`;
    const key = `${row.op}\u0000${label}`;
    let group = groups.get(key);
    if (!group) {
      group = { op: row.op, label, points: [] };
      groups.set(key, group);
    }
    const tokens = tokenDim ? row.shape[tokenDim] : undefined;
    let point = group.points.find((p) => p.tokens === tokens);
    if (!point) {
      point = { tokens, label: tokenDim ? `${tokenDim}=${tokens}` : 'all', bars: [] };
      group.points.push(point);
    }
    point.bars.push({ impl: row.impl, ours: isOurs(row.impl), fraction: row.fraction, row });
  }
  for (const g of groups.values()) {
    g.points.sort((a, b) => (a.tokens ?? 0) - (b.tokens ?? 0));
    for (const p of g.points) p.bars.sort((a, b) => Number(b.ours) - Number(a.ours) || a.impl.localeCompare(b.impl));
  }
  return [...groups.values()];
}

/** The backend a kvkit row ran on (`kvkit-cuda (cublasLt)` -> `cuda`); undefined for a peer. */
export const backendOf = (impl: string): string | undefined => /^kvkit-([a-z0-9]+)/.exec(impl)?.[1];

/** The token count and what makes a row differ from its op's plain form, short enough for a summary cell. */
export function shortLabel(row: BenchRow): string {
  const tokenDim = TOKEN_DIMS.find((d) => d in row.shape);
  return [row.dtype, tokenDim ? `${tokenDim}=${row.shape[tokenDim]}` : '', row.variant ?? ''].filter(Boolean).join(' ');
}

export type RateUnit = 'GB/s' | 'TFLOP/s';

/** A row's rate in a unit, or null where the row has none in it. */
export const rateIn = (row: BenchRow, unit: RateUnit): number | null => (unit === 'GB/s' ? row.gbs : row.tflops);

export interface ChartBaseline {
  unit: RateUnit;
  /** The one ceiling every bar of the chart is a share of. */
  ceiling: BenchCeiling;
}

/**
 * The one ceiling a chart's bars are all drawn against: the run's fastest ceiling in the unit most of its rows
 * carry. Each row's own ceiling differs by backend (kvkit's copy, the peers' PyTorch copy); on one GPU a single
 * baseline keeps bar lengths comparable. Undefined where the run has no ceiling in that unit.
 */
export function chartBaseline(run: BenchRun, group: ChartGroup): ChartBaseline | undefined {
  const rows = group.points.flatMap((p) => p.bars.map((b) => b.row));
  const gbs = rows.filter((r) => r.gbs !== null).length;
  const tflops = rows.filter((r) => r.tflops !== null).length;
  if (gbs === 0 && tflops === 0) return undefined;
  const unit: RateUnit = gbs >= tflops ? 'GB/s' : 'TFLOP/s';
  const fastest = run.ceilings.filter((c) => c.unit === unit).sort((a, b) => b.value - a.value)[0];
  return fastest ? { unit, ceiling: fastest } : undefined;
}

/** A bar's length against a chart's baseline, or null where the row has no rate in the baseline's unit. */
export function barShare(row: BenchRow, baseline: ChartBaseline): number | null {
  const rate = rateIn(row, baseline.unit);
  return rate === null ? null : rate / baseline.ceiling.value;
}

export interface PeerComparison {
  /** Shapes (op, dtype, variant, shape) where both this backend and at least one peer were measured. */
  shapes: number;
  /** Of those, where this backend's fastest row took less time than the fastest peer. */
  faster: number;
  /** The fastest peer's time over this backend's, smallest and largest over those shapes. */
  least: number;
  most: number;
  /** The peers that were the fastest at one shape or more. */
  peers: string[];
}

export interface SummaryLine {
  op: string;
  backend: string;
  /** The row with the highest share of its ceiling; rows read against another row count only where the op has no other. */
  best: { row: BenchRow; share: number; of: string };
  /** Rows carrying a target, and how many of them meet it. */
  targets: { met: number; rows: number };
  peers?: PeerComparison;
}

const shapeKey = (r: BenchRow) =>
  [r.op, r.dtype, r.variant ?? '', ...Object.entries(r.shape).sort(([a], [b]) => a.localeCompare(b)).map(([k, v]) => `${k}=${v}`)].join(' ');

/** Per op (in the run's order) and backend: the best share of a ceiling, the targets met, and the time against the peers. */
export function runSummary(run: BenchRun): SummaryLine[] {
  const lines: SummaryLine[] = [];
  const ops = [...new Set(run.rows.map((r) => r.op))];
  for (const op of ops) {
    const opRows = run.rows.filter((r) => r.op === op);
    const backends = [...new Set(opRows.map((r) => backendOf(r.impl)).filter((b): b is string => b !== undefined))];
    for (const backend of backends) {
      const ours = opRows.filter((r) => backendOf(r.impl) === backend);
      const againstCeiling = ours.filter((r) => r.reference === undefined);
      const candidates = againstCeiling.length > 0 ? againstCeiling : ours;
      let best = { row: candidates[0]!, ...shareOf(candidates[0]!) };
      for (const row of candidates.slice(1)) {
        const s = shareOf(row);
        if (s.value > best.value) best = { row, ...s };
      }
      const judged = ours.map(meetsTargets).filter((m): m is boolean => m !== undefined);
      const line: SummaryLine = {
        op,
        backend,
        best: { row: best.row, share: best.value, of: best.of },
        targets: { met: judged.filter(Boolean).length, rows: judged.length },
      };
      const peers = comparePeers(ours, opRows.filter((r) => !isOurs(r.impl)));
      if (peers) line.peers = peers;
      lines.push(line);
    }
  }
  return lines;
}

function comparePeers(ours: BenchRow[], theirs: BenchRow[]): PeerComparison | undefined {
  const fastest = (rows: BenchRow[]) => {
    const byShape = new Map<string, BenchRow>();
    for (const r of rows) {
      const k = shapeKey(r);
      const seen = byShape.get(k);
      if (!seen || r.us < seen.us) byShape.set(k, r);
    }
    return byShape;
  };
  const peerBest = fastest(theirs);
  const ratios: number[] = [];
  const peers = new Set<string>();
  for (const [k, row] of fastest(ours)) {
    const peer = peerBest.get(k);
    if (!peer) continue;
    ratios.push(peer.us / row.us);
    peers.add(peer.impl);
  }
  if (ratios.length === 0) return undefined;
  return { shapes: ratios.length, faster: ratios.filter((x) => x > 1).length, least: Math.min(...ratios), most: Math.max(...ratios), peers: [...peers].sort() };
}

/** An id fragment: anything but letters and digits as one dash, lower case. */
export const idPart = (s: string): string => s.replace(/[^A-Za-z0-9]+/g, '-').replace(/^-+|-+$/g, '').toLowerCase();

/** The ids of a run's section and of each op's heading in it, shared by the page's outline and the run's markup. */
export const runHeadingId = (run: BenchRun): string => `run-${idPart(run.date)}-${idPart(run.gpu)}`;
export const opHeadingId = (run: BenchRun, op: string): string => `${runHeadingId(run)}-${idPart(op)}`;
