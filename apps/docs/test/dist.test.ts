import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allOps } from '@kvkit/contracts/dsl';
import { cudaKernels, wgslKernels } from '@kvkit/contracts/kernels';
import { catalog } from '@kvkit/errors-catalog';
import { describe, expect, inject, it } from 'vitest';
import { isCallOf } from '../src/site/ops.js';
import { barShare, chartBaseline, chartGroups, loadBenchResults, runSummary, shareOf } from '../src/site/bench.js';
import { ropeVariants } from '../src/site/sidebar.js';
import { errorPath, kernelsPath, opPath } from '../src/site/routes.js';
import { docsRoot, fileForPath, pageAt as builtPage, listFiles } from './support/site.js';
import { attrValues, h1, ids, mainContent, section, textOf } from './support/html.js';

const siteDir = inject('siteDir');
const base = inject('siteBase');
const files = listFiles(siteDir);
const pages = files.filter((f) => f.endsWith('.html'));
const read = (file: string) => readFileSync(join(siteDir, file), 'utf8');
const pageAt = (path: string) => builtPage(siteDir, path);

const ERROR_SECTIONS = {
  'error-message': 'Error message',
  'what-it-means': 'What it means',
  source: 'Source',
  solutions: 'Solutions',
  'example-fix': 'Example fix',
  'when-it-happens': 'When it happens',
  'related-errors': 'Related errors',
};
const norm = (s: string) => s.replace(/\s+/g, ' ').trim();

describe('every catalog code has its page', () => {
  it.each(catalog.map((e) => [e.code, e] as const))('%s', (code, entry) => {
    const html = pageAt(errorPath(code));
    expect(html, `no page at ${errorPath(code)}`).toBeDefined();
    const page = html!;
    expect(h1(page)).toContain(code);
    expect(h1(page)).toContain(entry.title);

    for (const [id, label] of Object.entries(ERROR_SECTIONS)) {
      const body = section(page, id);
      expect(body, `${code}: section ${label}`).toBeDefined();
      expect(textOf(body!).startsWith(label), `${code}: heading of ${id}`).toBe(true);
      expect(textOf(body!).length, `${code}: ${label} is empty`).toBeGreaterThan(label.length + 10);
    }

    // The template, with each placeholder marked up rather than printed as plain text.
    const message = section(page, 'error-message')!;
    expect(norm(textOf(message))).toContain(norm(entry.message));
    for (const p of entry.placeholders) expect(message).toContain(`<var title="filled in with the actual value">{${p}}</var>`);

    const source = section(page, 'source')!;
    expect(textOf(source)).toContain(`${entry.source.file}:${entry.source.line}`);
    expect(attrValues(source, 'href').some((h) => h.endsWith(`/${entry.source.file}#L${entry.source.line}`))).toBe(true);

    expect([...section(page, 'solutions')!.matchAll(/<li>/g)].length).toBe(entry.solutions.length);
    const example = textOf(section(page, 'example-fix')!);
    for (const code of [entry.example.before, entry.example.after]) {
      for (const line of code.split('\n').filter((l) => l.trim())) expect(norm(example)).toContain(norm(line));
    }
    expect([...section(page, 'when-it-happens')!.matchAll(/<li>/g)].length).toBe(entry.situations.length);

    const related = attrValues(section(page, 'related-errors')!, 'href');
    for (const r of entry.related) expect(related).toContain(`${base}${errorPath(r)}`);

    // Other libraries' wordings, each with where it is raised.
    const wordings = section(page, 'other-wordings');
    expect(wordings !== undefined, `${code}: other wordings`).toBe(entry.upstream.length > 0);
    for (const u of entry.upstream) {
      expect(norm(textOf(wordings!))).toContain(norm(u.message));
      if (u.source) expect(norm(textOf(wordings!))).toContain(norm(u.source));
    }

    // Retired codes say so; live ones do not.
    expect(/\bretired\b/i.test(textOf(mainContent(page).replace(/<h2[^>]*id="related-errors"[\s\S]*/, '')))).toBe(entry.retired === true);
  });

  it('has no error page for a code the catalog does not hold', () => {
    const pageCodes = pages.map((f) => /^errors\/(kv\d+)\/index\.html$/.exec(f)?.[1]).filter(Boolean);
    expect(pageCodes.sort()).toEqual(catalog.map((e) => e.code.toLowerCase()).sort());
  });
});

describe('every op has its page', () => {
  it.each(allOps.map((op) => [op.name, op] as const))('%s', (name, op) => {
    const page = pageAt(opPath(name));
    expect(page, `no page at ${opPath(name)}`).toBeDefined();
    expect(h1(page!)).toBe(name);
    for (const id of ['signature', 'arguments', 'dims', 'what-it-computes', 'errors']) expect(section(page!, id), `${name}: ${id}`).toBeDefined();

    const signature = textOf(section(page!, 'signature')!);
    for (const step of op.steps) if ('name' in step && step.kind !== 'values') expect(signature).toContain(`${step.name}`);

    const dims = section(page!, 'dims')!;
    for (const dim of Object.keys(op.dims)) expect(dims).toContain(`<td><code>${dim}</code></td>`);

    // What it computes: the op's prose file rendered, not the placeholder for a missing one.
    const computes = textOf(section(page!, 'what-it-computes')!);
    expect(computes).not.toContain('Not written yet');
    expect(computes.length).toBeGreaterThan(200);

    const linked = new Set(attrValues(section(page!, 'errors')!, 'href'));
    const raised = catalog.filter((e) => e.raisedBy.some((call) => isCallOf(call, op)));
    expect(raised.length).toBeGreaterThan(0);
    for (const e of raised) expect(linked, `${name} -> ${e.code}`).toContain(`${base}${errorPath(e.code)}`);
    expect(linked.size).toBe(raised.length);
  });
});

describe('every RoPE scaling variant has its page', () => {
  const fields = (tag: string) => {
    for (const op of allOps) for (const step of op.steps) if (step.kind === 'tagged') return Object.keys(step.variants[tag]!.fields);
    return [];
  };
  it.each(ropeVariants(allOps))('%s: its formula and the config key of every declared field', (tag) => {
    const page = pageAt(`rope/${tag}/`);
    expect(page, `rope/${tag}/ was not built`).toBeDefined();
    const text = textOf(mainContent(page!));
    expect(text).toContain(`type: '${tag}'`);
    expect(text).toMatch(/f\[j\]/);
    for (const field of fields(tag)) expect(text, `${tag}: ${field}`).toContain(field);
  });
});

describe('pages', () => {
  it('no page is empty', () => {
    expect(pages.length).toBeGreaterThan(catalog.length + allOps.length);
    for (const file of pages) {
      if (file === '404.html') continue;
      const text = textOf(mainContent(read(file)));
      expect(text.length, `${file} has almost no content`).toBeGreaterThan(150);
    }
  });

  it('the home page, the code index and the op index list what they promise', () => {
    const codes = attrValues(pageAt('errors/')!, 'href');
    for (const e of catalog) expect(codes).toContain(`${base}${errorPath(e.code)}`);
    const ops = attrValues(pageAt('ops/')!, 'href');
    for (const op of allOps) expect(ops).toContain(`${base}${opPath(op.name)}`);
    expect(textOf(mainContent(pageAt('')!))).toContain('Look up an error message');
  });

  it('Pagefind indexed every page of content', () => {
    const entry = JSON.parse(read('pagefind/pagefind-entry.json')) as { languages: Record<string, { page_count: number }> };
    const indexed = Object.values(entry.languages).reduce((n, l) => n + l.page_count, 0);
    expect(indexed).toBe(pages.filter((f) => f !== '404.html').length);
  });
});

describe('kernels page', () => {
  const content = mainContent(pageAt(kernelsPath)!);
  const text = norm(textOf(content));

  it('lists every CUDA kernel with its struct, each launch with its threads, and every entry point and parameter', () => {
    for (const k of cudaKernels) {
      expect(ids(content).has(`cuda-${k.kernel.toLowerCase()}`), k.kernel).toBe(true);
      expect(text).toContain(`${k.kernel} (${k.struct})`);
      for (const [name, launch] of Object.entries(k.launches)) expect(text, `${k.kernel} ${name}`).toContain(`${name}${launch.doc ? `: ${launch.doc}` : ''} ${launch.threads}`);
      for (const e of k.entries) expect(text).toContain(e.name);
      for (const [name, p] of Object.entries(k.params)) expect(text, `${k.struct}.${name}`).toContain(norm(p.doc));
      expect(text).toContain(`${Object.keys(k.params).length} parameters of ${k.struct}`);
    }
  });

  it('lists every WGSL kernel with each binding, type slot, variant flag and uniform word', () => {
    for (const k of wgslKernels) {
      expect(ids(content).has(`wgsl-${k.kernel.toLowerCase()}`), k.kernel).toBe(true);
      for (const [name, b] of Object.entries(k.bindings)) expect(text, `${k.kernel}.${name}`).toContain(`${name} ${b.access} ${b.element} ${norm(b.doc)}`);
      for (const slot of Object.keys(k.types ?? {})) expect(text).toContain(`${slot}:`);
      for (const flag of Object.keys(k.variants ?? {})) expect(text).toContain(`flag ${flag}`);
      expect(text).toContain(`${Object.keys(k.uniforms).length} uniform words`);
    }
  });
});

describe('benchmarks page (fixture results)', () => {
  const fixture = JSON.parse(readFileSync(join(docsRoot, 'test/fixtures/bench/2026-11-29-nvidia-h200.json'), 'utf8')) as {
    date: string;
    gpu: string;
    rows: { op: string; impl: string; fraction: number; ceiling: string }[];
  };
  const page = pageAt('benchmarks/')!;
  const content = mainContent(page);

  it('charts every row as a bar whose width and label are its share of the chart\'s one baseline, beside its share of its own ceiling', () => {
    expect(textOf(content)).not.toContain('No benchmark results yet');
    expect(textOf(content)).toContain(`${fixture.date}, ${fixture.gpu}`);
    const [run] = loadBenchResults(join(docsRoot, 'test/fixtures/bench')).runs;
    const charts = [...content.matchAll(/<table class="kv-bars"[^>]*>([\s\S]*?)<\/table>/g)].map((m) => m[1]!);
    const groups = chartGroups(run!);
    expect(charts.length).toBe(groups.length);
    let bars = 0;
    groups.forEach((g, i) => {
      const chart = charts[i]!;
      const baseline = chartBaseline(run!, g)!;
      // The caption names the one ceiling every bar of this chart is a share of.
      expect(textOf(/<caption>([\s\S]*?)<\/caption>/.exec(chart)![1]!)).toContain(`Share of ${baseline.ceiling.name}`);
      const rows = [...chart.matchAll(/<tr( class="kv-ours")?[^>]*>([\s\S]*?)<\/tr>/g)].filter((m) => m[2]!.includes('kv-bar-fill'));
      expect(rows.length).toBe(g.points.reduce((n, p) => n + p.bars.length, 0));
      for (const b of g.points.flatMap((p) => p.bars)) {
        const share = barShare(b.row, baseline)!;
        const found = rows.find((m) => textOf(m[2]!).includes(b.impl) && m[2]!.includes(`width: ${Math.min(1, share) * 100}%`));
        expect(found, `${g.op} ${b.impl}`).toBeDefined();
        expect(textOf(found![2]!)).toContain(`of ${shareOf(b.row).of}`);
        expect(Boolean(found![1]), `${b.impl} highlighted as ours`).toBe(b.ours);
        bars++;
      }
    });
    expect(bars).toBe(fixture.rows.length);
  });

  it('opens with a summary: a line per op and backend, derived from the run', () => {
    const [run] = loadBenchResults(join(docsRoot, 'test/fixtures/bench')).runs;
    const summary = /<table class="kv-summary"[^>]*>([\s\S]*?)<\/table>/.exec(content)?.[1];
    expect(summary).toBeDefined();
    expect(content.indexOf('kv-summary')).toBeLessThan(content.indexOf('kv-bars'));
    const lines = runSummary(run!);
    const rows = [...summary!.matchAll(/<tr>([\s\S]*?)<\/tr>/g)].map((m) => textOf(m[1]!)).slice(1);
    expect(rows.length).toBe(lines.length);
    lines.forEach((l, i) => {
      expect(rows[i]).toContain(l.backend);
      expect(rows[i]).toContain(`${(l.best.share * 100).toFixed(l.best.share < 0.1 ? 1 : 0)}%`);
      expect(rows[i]).toContain(l.targets.rows === 0 ? 'none set' : `${l.targets.met} of ${l.targets.rows}`);
      expect(rows[i]).toContain(l.peers ? `faster in ${l.peers.faster} of ${l.peers.shapes}` : 'no peer measured');
    });
  });

  it('is readable without JavaScript: no script is needed to draw the bars', () => {
    expect(content).not.toMatch(/<script/);
    expect(content).not.toMatch(/<canvas/);
  });
});

describe('the lookup runs the catalog matcher in the browser', () => {
  it("@kvkit/errors-catalog's entry point, and the kvkit modules it imports, import nothing from Node and read `process` only through globalThis", () => {
    const entry = fileURLToPath(import.meta.resolve('@kvkit/errors-catalog'));
    const seen = new Set<string>();
    const problems: string[] = [];
    const visit = (file: string) => {
      if (seen.has(file)) return;
      seen.add(file);
      const code = readFileSync(file, 'utf8');
      for (const [, spec] of code.matchAll(/(?:import|export)\s[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g)) {
        if (!spec) continue;
        if (spec.startsWith('.')) visit(join(dirname(file), spec));
        // The catalog sits on @kvkit/contracts (ContractError, the error table): followed, not refused.
        else if (spec.startsWith('@kvkit/')) visit(fileURLToPath(import.meta.resolve(spec)));
        else problems.push(`${file}: imports ${spec}`);
      }
      for (const m of code.matchAll(/(?<![.\w])process\s*\??\./g)) problems.push(`${file}: uses process at ${m.index}`);
    };
    visit(entry);
    expect(seen.size).toBeGreaterThan(2);
    expect(problems).toEqual([]);
  });

  it('the built lookup script bundles the matcher and has no Node import left in it', () => {
    const html = pageAt('lookup/')!;
    const scripts = attrValues(html, 'src').filter((s) => s.includes('lookup'));
    expect(scripts.length).toBe(1);
    const bundle = readFileSync(fileForPath(siteDir, new URL(scripts[0]!, 'http://site/').pathname.slice(base.length))!, 'utf8');
    expect(bundle).not.toMatch(/from\s*["']node:|import\(\s*["']node:|require\(/);
    for (const e of catalog) expect(bundle).toContain(JSON.stringify(e.code));
  });
});
