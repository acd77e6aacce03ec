import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type BenchRow, type BenchRun, backendOf, barShare, chartBaseline, chartGroups, loadBenchResults, meetsTargets, runSummary, shareOf } from '../src/site/bench.js';
import { docsRoot } from './support/site.js';

const fixtureDir = join(docsRoot, 'test', 'fixtures', 'bench');
const committedDir = join(docsRoot, '..', '..', 'bench', 'results');
const fixture = JSON.parse(readFileSync(join(fixtureDir, '2026-11-29-nvidia-h200.json'), 'utf8'));
const dirs: string[] = [];
const scratch = (files: Record<string, unknown>) => {
  const dir = mkdtempSync(join(tmpdir(), 'kvkit-bench-'));
  dirs.push(dir);
  for (const [name, body] of Object.entries(files)) writeFileSync(join(dir, name), typeof body === 'string' ? body : JSON.stringify(body));
  return dir;
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('benchmark results loader', () => {
  it('reads a missing or empty folder as "no results yet"', () => {
    expect(loadBenchResults(join(tmpdir(), 'kvkit-no-such-folder-for-bench'))).toEqual({ runs: [], skipped: [] });
    expect(loadBenchResults(scratch({ 'README.md': 'not a run' }))).toEqual({ runs: [], skipped: [] });
  });

  it('reads every row of the fixture, newest run first', () => {
    const older = { ...fixture, date: '2026-10-01' };
    const { runs } = loadBenchResults(scratch({ 'a.json': older, 'b.json': fixture }));
    expect(runs.map((r) => r.date)).toEqual([fixture.date, '2026-10-01']);
    expect(runs[0]!.rows.length).toBe(fixture.rows.length);
  });

  it('names the file and the field of a malformed run', () => {
    const bad = { ...fixture, rows: [{ ...fixture.rows[0], fraction: 'high' }] };
    expect(() => loadBenchResults(scratch({ 'bad.json': bad }))).toThrow(/bad\.json: rows\[0\]\.fraction/);
    const orphan = { ...fixture, rows: [{ ...fixture.rows[0], ceiling: 'no-such-ceiling' }] };
    expect(() => loadBenchResults(scratch({ 'orphan.json': orphan }))).toThrow(/orphan\.json: .*no-such-ceiling/);
  });

  it('loads every committed run in bench/results, every row of it', () => {
    const files = readdirSync(committedDir).filter((f) => f.endsWith('.json'));
    expect(files.length).toBeGreaterThan(0);
    const { runs, skipped } = loadBenchResults(committedDir);
    expect(skipped).toEqual([]);
    expect(runs.map((r) => r.file).sort()).toEqual(files.sort());
    for (const run of runs) expect(run.rows.length).toBe(JSON.parse(readFileSync(join(committedDir, run.file), 'utf8')).rows.length);
  });

  it('takes a row measured against another row of its run, and checks what it names', () => {
    const shape = { T: 7, hidden: 96 };
    const base = { dtype: 'bf16', shape, bytes: 0, flops: 1e9, gbs: null, tflops: 1 };
    const alone = { ...base, op: 'projection', impl: 'peer-gemm', us: 30, ceiling: fixture.ceilings[0].name, fraction: 0.5 };
    const fused = { ...base, op: 'materialize', impl: 'kvkit-x', us: 40, ceiling: 'projection alone (peer-gemm)', fraction: 30 / 40, reference: { op: 'projection', impl: 'peer-gemm' } };
    const run = (rows: unknown[]) => scratch({ 'r.json': { ...fixture, rows } });
    const [loaded] = loadBenchResults(run([alone, fused])).runs;
    expect(loaded!.rows[1]!.reference).toEqual({ op: 'projection', impl: 'peer-gemm' });
    expect(() => loadBenchResults(run([alone, { ...fused, reference: { op: 'projection', impl: 'other' } }]))).toThrow(/rows\[1\]\.reference projection 'other' names 0 rows/);
    expect(() => loadBenchResults(run([{ ...alone, shape: { T: 8, hidden: 96 } }, fused]))).toThrow(/names 0 rows/);
    expect(() => loadBenchResults(run([alone, alone, fused]))).toThrow(/names 2 rows/);
    expect(() => loadBenchResults(run([alone, { ...fused, fraction: 0.9 }]))).toThrow(/rows\[1\]\.fraction 0\.9 is not/);
    expect(() => loadBenchResults(run([alone, { ...fused, reference: undefined }]))).toThrow(/is not one of the run's ceilings/);
  });

  it('keeps the same-size copy of a memory-bound row, and names a malformed one', () => {
    const row = { ...fixture.rows[0], sizedCopyGbs: 3812.5 };
    const [loaded] = loadBenchResults(scratch({ 'r.json': { ...fixture, rows: [row] } })).runs;
    expect(loaded!.rows[0]!.sizedCopyGbs).toBe(3812.5);
    expect(() => loadBenchResults(scratch({ 'bad.json': { ...fixture, rows: [{ ...row, sizedCopyGbs: '3812' }] } }))).toThrow(/bad\.json: rows\[0\]\.sizedCopyGbs/);
  });

  it('leaves out, and reports, a run in a schema it does not know', () => {
    const { runs, skipped } = loadBenchResults(scratch({ 'next.json': { ...fixture, schema: 2 } }));
    expect(runs).toEqual([]);
    expect(skipped.map((s) => s.file)).toEqual(['next.json']);
  });
});

describe('chart groups', () => {
  const [run] = loadBenchResults(fixtureDir).runs;

  it('keeps every row exactly once, per op and shape, token counts ascending, ours before the peers', () => {
    const groups = chartGroups(run!);
    const bars = groups.flatMap((g) => g.points.flatMap((p) => p.bars));
    expect(bars.length).toBe(run!.rows.length);
    expect(new Set(bars.map((b) => b.row)).size).toBe(run!.rows.length);
    for (const g of groups) {
      const tokens = g.points.map((p) => p.tokens ?? 0);
      expect(tokens).toEqual([...tokens].sort((a, b) => a - b));
      for (const p of g.points) {
        const ours = p.bars.map((b) => b.impl.startsWith('kvkit-'));
        expect(ours).toEqual([...ours].sort((a, b) => Number(b) - Number(a)));
        for (const b of p.bars) expect(b.row.op).toBe(g.op);
      }
    }
  });
});

describe('one baseline per chart', () => {
  const runs = [...loadBenchResults(fixtureDir).runs, ...loadBenchResults(committedDir).runs];

  it.each(runs.map((r) => [r.file, r] as const))('%s: every bar of a chart is a share of the run\'s fastest ceiling in the chart\'s unit', (_, run) => {
    let drawn = 0;
    for (const g of chartGroups(run)) {
      const baseline = chartBaseline(run, g);
      expect(baseline, `${g.op} ${g.label}`).toBeDefined();
      const fastest = Math.max(...run.ceilings.filter((c) => c.unit === baseline!.unit).map((c) => c.value));
      expect(baseline!.ceiling.value).toBe(fastest);
      for (const b of g.points.flatMap((p) => p.bars)) {
        const rate = baseline!.unit === 'GB/s' ? b.row.gbs : b.row.tflops;
        const share = barShare(b.row, baseline!);
        if (rate === null) expect(share).toBeNull();
        else {
          expect(share).toBeCloseTo(rate / fastest, 12);
          drawn++;
        }
      }
    }
    // Peers and kvkit are read against different ceilings of their own; in a chart they share one.
    expect(drawn).toBe(run.rows.length);
  });
});

describe('summary of a run', () => {
  const ceilings = [
    { name: 'copy-a', backend: 'cuda', unit: 'GB/s', value: 4000 },
    { name: 'copy-peer', backend: 'torch', unit: 'GB/s', value: 3900 },
  ];
  const row = (impl: string, T: number, us: number, gbs: number, extra: Partial<BenchRow> = {}): BenchRow => ({
    op: 'fusedNormRopeStacked',
    impl,
    dtype: 'bf16',
    shape: { L: 5, T },
    us,
    bytes: gbs * us * 1e3,
    flops: 0,
    gbs,
    tflops: null,
    ceiling: impl.startsWith('kvkit-') ? 'copy-a' : 'copy-peer',
    fraction: gbs / (impl.startsWith('kvkit-') ? 4000 : 3900),
    ...extra,
  });
  const run = (rows: BenchRow[]): BenchRun => ({ file: 'x.json', schema: 1, date: '2026-01-01', gpu: 'gpu', driver: '', notes: [], ceilings, rows, hostIo: [] });

  it('takes the best share against the same-size copy where a row has one, counts targets met, and compares times with the fastest peer', () => {
    const rows = [
      row('kvkit-cuda', 16, 4, 160, { targetUs: 5 }),
      row('kvkit-cuda', 4096, 50, 3400, { target: 0.9, sizedCopyGbs: 3600 }),
      row('kvkit-cuda', 32768, 380, 3500, { target: 0.9, sizedCopyGbs: 4000 }),
      row('torch-eager', 16, 200, 3),
      row('sglang-triton', 16, 10, 60),
      row('sglang-triton', 4096, 40, 4100),
    ];
    const [line, ...rest] = runSummary(run(rows));
    expect(rest).toEqual([]);
    expect(line!.op).toBe('fusedNormRopeStacked');
    expect(line!.backend).toBe('cuda');
    // 3400 / 3600 beats 3500 / 4000 and every fraction of the large copy.
    expect(line!.best.row).toBe(rows[1]);
    expect(line!.best.share).toBeCloseTo(3400 / 3600, 12);
    expect(line!.best.of).toBe('same-size copy');
    expect(line!.targets).toEqual({ met: 2, rows: 3 });
    expect(line!.peers).toEqual({ shapes: 2, faster: 1, least: 40 / 50, most: 10 / 4, peers: ['sglang-triton'] });
  });

  it('reads an op only against another row where none of its rows has a ceiling, and says when no peer ran', () => {
    const alone = { ...row('kvkit-webgpu', 4096, 30, 0), op: 'projection', gbs: null, tflops: 40, ceiling: 'copy-a', fraction: 0.5 };
    const fused = { ...alone, op: 'materialize', us: 40, ceiling: 'projection alone', fraction: 30 / 40, reference: { op: 'projection', impl: 'kvkit-webgpu' } };
    const lines = runSummary(run([alone, fused]));
    expect(lines.map((l) => [l.op, l.backend, l.best.of, l.best.share, l.peers])).toEqual([
      ['projection', 'webgpu', 'copy-a', 0.5, undefined],
      ['materialize', 'webgpu', 'projection alone', 0.75, undefined],
    ]);
    const mixed = runSummary(run([row('kvkit-cuda', 16, 4, 160), { ...row('kvkit-cuda', 16, 4.1, 156), variant: 'op-made outputs', ceiling: 'caller outputs', fraction: 4 / 4.1, reference: { op: 'fusedNormRopeStacked', impl: 'kvkit-cuda' } }]));
    expect(mixed[0]!.best.of).toBe('copy-a');
  });

  it('on every committed run: one line per op and backend measured, each best share the highest of its rows', () => {
    for (const r of loadBenchResults(committedDir).runs) {
      const lines = runSummary(r);
      const pairs = new Set(r.rows.flatMap((w) => (backendOf(w.impl) ? [`${w.op} ${backendOf(w.impl)}`] : [])));
      expect(new Set(lines.map((l) => `${l.op} ${l.backend}`))).toEqual(pairs);
      for (const l of lines) {
        const ours = r.rows.filter((w) => w.op === l.op && backendOf(w.impl) === l.backend);
        const ceilingRows = ours.filter((w) => !w.reference);
        const shares = (ceilingRows.length > 0 ? ceilingRows : ours).map((w) => shareOf(w).value);
        expect(l.best.share).toBe(Math.max(...shares));
        expect(l.targets.rows).toBe(ours.filter((w) => meetsTargets(w) !== undefined).length);
        expect(l.targets.met).toBe(ours.filter((w) => meetsTargets(w) === true).length);
      }
    }
  });
});
