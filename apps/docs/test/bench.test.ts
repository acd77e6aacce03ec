import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { chartGroups, loadBenchResults } from '../src/site/bench.js';
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
