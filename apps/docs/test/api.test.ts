/**
 * The API reference pages against what the packages export, taken independently of the pages' own generator:
 * the value exports of each entry from the module itself (`import()`), the type exports from its built
 * declarations (the TypeScript checker on `dist/*.d.ts`), and the methods of a real backend object.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { allOps } from '@kvkit/contracts/dsl';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import ts from 'typescript';
import { describe, expect, inject, it } from 'vitest';
import { type ApiItem, apiPages } from '../src/site/api.js';
import { publicPackages } from '../src/site/packages.js';
import { apiIndexPath, apiPath, opPath } from '../src/site/routes.js';
import { attrValues, ids, mainContent, textOf } from './support/html.js';
import { docsRoot, pageAt as builtPage } from './support/site.js';

const siteDir = inject('siteDir');
const base = inject('siteBase');
const pageAt = (path: string) => builtPage(siteDir, path);
const norm = (s: string) => s.replace(/\s+/g, ' ').trim();
const pages = apiPages(allOps);
const packages = publicPackages();

/** The HTML of one item: from the element with this id to the next item or section heading. */
function itemHtml(html: string, id: string): string {
  const at = html.search(new RegExp(`<h3[^>]*\\bid="${id.replace(/[$]/g, '\\$&')}"`));
  if (at < 0) return '';
  const ends = [html.indexOf('<h3', at + 3), html.indexOf('<h2', at), html.indexOf('<footer', at)].filter((i) => i >= 0);
  return html.slice(at, Math.min(...ends));
}

const repoRoot = join(docsRoot, '..', '..');

/** The names an entry exports, read from its built declaration file (package.json `exports[subpath].types`) with the TypeScript checker. */
function declaredExports(pkgDir: string, subpath: string): string[] {
  const root = join(repoRoot, 'packages', pkgDir);
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { exports: Record<string, { types: string }> };
  const dts = join(root, pkg.exports[subpath]!.types);
  const program = ts.createProgram([dts], { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'], types: ['node'], noEmit: true });
  const checker = program.getTypeChecker();
  const moduleSymbol = checker.getSymbolAtLocation(program.getSourceFile(dts)!)!;
  return checker.getExportsOfModule(moduleSymbol).map((s) => s.getName());
}

describe('API reference: the pages', () => {
  it('has an index listing every published package with its version, and a page per package', () => {
    expect(packages.map((p) => p.dir)).toEqual(['contracts', 'kernels-cpu', 'kernels-wgsl', 'kernels-cuda', 'errors-catalog']);
    const index = pageAt(apiIndexPath);
    expect(index, 'api/ was not built').toBeDefined();
    const hrefs = attrValues(mainContent(index!), 'href');
    const text = norm(textOf(mainContent(index!)));
    for (const p of packages) {
      expect(hrefs).toContain(`${base}${apiPath(p.dir)}`);
      expect(text).toContain(`${p.name} ${p.version}`);
      const page = pageAt(apiPath(p.dir));
      expect(page, `${apiPath(p.dir)} was not built`).toBeDefined();
      expect(textOf(/<h1[^>]*>([\s\S]*?)<\/h1>/.exec(page!)![1]!)).toBe(p.name);
      // The version line, from the package's package.json.
      expect(norm(textOf(mainContent(page!)))).toContain(`Version ${p.version} · npm install ${p.name}`);
    }
  });
});

describe.each(packages.map((p) => [p.name, p] as const))('API reference: %s', (name, pkg) => {
  const html = pageAt(apiPath(pkg.dir)) ?? '';
  const content = mainContent(html);
  const text = norm(textOf(content));
  const model = pages.find((p) => p.pkg.name === name)!;
  const items = model.entries.flatMap((e) => e.groups.flatMap((g) => g.items.map((i) => [e.specifier, i] as const)));

  it('documents every entry a user imports, and names the others', () => {
    const documented = model.entries.map((e) => e.specifier);
    for (const e of pkg.entries) {
      if (documented.includes(e.specifier)) continue;
      expect(e.specifier, 'only the contracts keep entries for backend authors and generators').toMatch(/^@kvkit\/contracts\/(backend|dsl|kernels)$/);
      expect(text).toContain(e.specifier);
    }
    expect(documented).toContain(name);
  });

  it.each(model.entries.map((e) => [e.specifier, e] as const))('%s: every value export (from the module) and every type export (from its .d.ts) has its item', async (specifier, entry) => {
    const prefix = entry.prefix;
    const values = Object.keys(await import(specifier));
    const declared = declaredExports(pkg.dir, pkg.entries.find((e) => e.specifier === specifier)!.subpath);
    expect(values.length).toBeGreaterThan(0);
    for (const n of values) expect(declared, `${specifier}: ${n} is a value export missing from the .d.ts`).toContain(n);
    const pageIds = ids(content);
    for (const n of declared) expect(pageIds.has(`${prefix}${n}`), `${specifier}: no item for ${n} (id ${prefix}${n})`).toBe(true);
    expect(entry.groups.flatMap((g) => g.items).length).toBe(declared.length);
  });

  it.each(items.map(([s, i]) => [`${s} ${i.name}`, i] as const))('%s: its declaration, its doc comment and its members', (_, item: ApiItem) => {
    const block = itemHtml(content, item.id);
    expect(block, `no item ${item.id}`).not.toBe('');
    const shown = norm(textOf(block));
    for (const sig of item.signatures) expect(shown).toContain(norm(sig));
    expect(item.doc, `${item.name} has no doc comment: write one in its source`).not.toBe('');
    expect(shown).toContain(norm(item.doc.replace(/`/g, '')).slice(0, 60));
    if (item.source) expect(shown).toContain(`${item.source.file}:${item.source.line}`);
    const blockIds = ids(block);
    for (const m of item.members) {
      expect(blockIds.has(m.id), `${item.name}.${m.name}`).toBe(true);
      for (const sig of m.signatures) expect(shown, `${item.name}.${m.name}`).toContain(norm(sig));
      if (m.op) expect(attrValues(block, 'href')).toContain(`${base}${opPath(m.op)}`);
    }
  });

  it("every member of the entry's own interfaces and classes has a doc comment (options, fields, methods)", () => {
    const missing = model.entries
      .flatMap((e) => e.groups.filter((g) => !g.title.startsWith('Also exported by')).flatMap((g) => g.items))
      .flatMap((i) => i.members.filter((m) => m.doc === '').map((m) => `${i.name}.${m.name}`));
    expect(missing).toEqual([]);
  });
});

describe('API reference: Backend', () => {
  const contracts = mainContent(pageAt(apiPath('contracts')) ?? '');
  const backend = itemHtml(contracts, 'Backend');
  const shown = norm(textOf(backend));
  const model = pages[0]!.entries[0]!.groups.flatMap((g) => g.items).find((i) => i.name === 'Backend')!;

  it('lists every method and property a real backend has, with its signature and doc comment', () => {
    const cpu = createCpuBackend();
    const keys = Object.keys(cpu);
    cpu.dispose();
    for (const k of ['tensor', 'empty', 'read', 'readBits', 'view', 'flush', 'sync', 'dispose']) expect(keys).toContain(k);
    for (const k of keys) {
      const member = model.members.find((m) => m.name === k);
      expect(member, `Backend.${k} is not on the page`).toBeDefined();
      expect(ids(backend).has(`Backend-${k}`)).toBe(true);
      expect(member!.doc, `Backend.${k} has no doc comment`).not.toBe('');
      for (const sig of member!.signatures) expect(shown).toContain(norm(sig));
    }
  });

  it("lists every op with the signature its page shows, linked to that page", () => {
    for (const op of allOps.filter((o) => !o.name.includes('.'))) {
      const member = model.members.find((m) => m.name === op.name);
      expect(member?.op, op.name).toBe(op.name);
      expect(attrValues(backend, 'href')).toContain(`${base}${opPath(op.name)}`);
      const opPage = norm(textOf(pageAt(opPath(op.name))!));
      for (const sig of member!.signatures) {
        expect(shown).toContain(norm(sig));
        expect(opPage).toContain(norm(sig));
      }
    }
  });

  it('WebGpuBackend has wrap, and the CUDA and catalog pages their own calls', () => {
    const wgsl = itemHtml(mainContent(pageAt(apiPath('kernels-wgsl'))!), 'WebGpuBackend');
    expect(ids(wgsl).has('WebGpuBackend-wrap')).toBe(true);
    expect(norm(textOf(wgsl))).toContain('wrap<const DT extends DType, const S extends Shape>(buffer: GPUBuffer, dtype: DT, shape: S, options?: WrapOptions): Tensor<DT, S>');
    for (const [dir, id] of [
      ['kernels-cpu', 'createCpuBackend'],
      ['kernels-wgsl', 'createWebGpuBackend'],
      ['kernels-wgsl', 'WebGpuBackendOptions-batching'],
      ['kernels-cuda', 'createCudaBackend'],
      ['kernels-cuda', 'CudaBackendOptions-stream'],
      ['errors-catalog', 'lookup'],
      ['contracts', 'ContractError-docsUrl'],
      ['contracts', 'setDocsBase'],
    ] as const) {
      expect(ids(pageAt(apiPath(dir))!).has(id), `${dir}#${id}`).toBe(true);
    }
  });

  it("the catalog's page lists every command of the kvkit CLI, from its usage text", () => {
    const cli = pages.find((p) => p.pkg.dir === 'errors-catalog')!.cli!;
    const source = readFileSync(join(repoRoot, cli.file), 'utf8');
    const usage = /const USAGE = `([\s\S]*?)`/.exec(source)![1]!;
    const commands = usage.split('\n').filter((l) => l.trim().startsWith('kvkit '));
    expect(cli.commands.length).toBe(commands.length);
    const page = norm(textOf(mainContent(pageAt(apiPath('errors-catalog'))!)));
    for (const c of commands) {
      const [usageText, what] = c.trim().split(/\s{2,}/);
      expect(page).toContain(`${usageText} ${what}`);
    }
  });
});
