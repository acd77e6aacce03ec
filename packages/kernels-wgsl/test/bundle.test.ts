/**
 * What a web app ships when it imports this package: the built entry bundled
 * for the browser by Vite, minified, in chunks. What a page loads up front is
 * the entry and the chunks it imports statically; the backend's code is a
 * chunk that createWebGpuBackend imports while it asks for the adapter.
 * `ContractError` renders its messages from the small table in
 * @kvkit/contracts, so none of the catalog's prose (what a code means, when it
 * happens, its situations) may come along in any chunk; the kernels' WGSL is
 * minified by the build, so none of its comments may either; and the sizes
 * stay under the figures the README gives.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { catalog } from '@kvkit/errors-catalog';
import ts from 'typescript';
import { build } from 'vite';
import { describe, expect, it } from 'vitest';

/**
 * What a page loads up front, in bytes of gzip (each chunk gzipped as it is served): 25.6 kB measured (the entry,
 * and ContractError with its table of 92 codes, which grows about 0.15 kB a code), and a margin.
 */
const MAX_UP_FRONT_GZIP_BYTES = 27_000;
/**
 * Everything a first op call needs (every chunk: op calls are synchronous, so the backend's chunk holds every
 * kernel variant and is loaded before createWebGpuBackend resolves), printed above: 84.7 kB measured with
 * pagedAttention, copySlots and mlaPoolFused, the WGSL minified and the generated uniform writers compact (90.7 kB
 * without), and a margin. A bound against an accidental import or a build that stops minifying, not a target.
 */
const MAX_ALL_GZIP_BYTES = 88_000;

interface Chunk {
  readonly fileName: string;
  readonly code: string;
  readonly isEntry: boolean;
  readonly imports: readonly string[];
}

async function browserChunks(entry: URL): Promise<Chunk[]> {
  const result = await build({
    configFile: false,
    logLevel: 'silent',
    build: { lib: { entry: fileURLToPath(entry), formats: ['es'], fileName: 'bundle' }, write: false, minify: true, target: 'es2022' },
  });
  const outputs = (Array.isArray(result) ? result : [result]) as { output: ({ type: 'chunk' } & Chunk | { type: 'asset' })[] }[];
  return outputs.flatMap((o) => o.output).flatMap((c) => (c.type === 'chunk' ? [c] : []));
}

async function browserBundle(entry: URL): Promise<string> {
  return (await browserChunks(entry)).map((c) => c.code).join('\n');
}

/** The entry and every chunk it imports statically, transitively: what loads before any code of the page runs. */
function upFront(chunks: readonly Chunk[]): Chunk[] {
  const byName = new Map(chunks.map((c) => [c.fileName, c]));
  const seen = new Set<Chunk>();
  const visit = (c: Chunk) => {
    if (seen.has(c)) return;
    seen.add(c);
    for (const name of c.imports) visit(byName.get(name)!);
  };
  for (const c of chunks) if (c.isEntry) visit(c);
  return [...seen];
}

const gzipBytes = (chunks: readonly Chunk[]) => chunks.reduce((n, c) => n + gzipSync(c.code).length, 0);

/** Stretches of plain words from every entry's prose: a minifier may re-quote a string or escape a symbol, never these. */
const probes = catalog
  .flatMap((e) => [e.meaning, e.whenItHappens, ...e.situations].map((text) => ({ code: e.code, phrase: longestPlainRun(text) })))
  .filter((p) => p.phrase.length >= 24);

/** The `//` comments in the WGSL of the kernel builders (src/shaders), as written: none may reach a bundle. */
const wgslComments = readdirSync(fileURLToPath(new URL('../src/shaders/', import.meta.url)))
  .filter((f) => f.endsWith('.ts'))
  .flatMap((f) => {
    const file = fileURLToPath(new URL(`../src/shaders/${f}`, import.meta.url));
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.ES2022, true);
    const found: string[] = [];
    const visit = (node: ts.Node) => {
      if (ts.isNoSubstitutionTemplateLiteral(node) || ts.isTemplateHead(node) || ts.isTemplateMiddle(node) || ts.isTemplateTail(node)) {
        for (const m of node.text.matchAll(/\/\/([^\n]*)\n/g)) found.push(longestPlainRun(m[1]!));
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
    return found;
  })
  .filter((c) => c.length >= 24);

function longestPlainRun(text: string): string {
  return (text.match(/[A-Za-z0-9 ,.;:()]+/g) ?? []).map((s) => s.trim()).reduce((a, b) => (b.length > a.length ? b : a), '');
}

describe('browser bundle', () => {
  it('finds the prose where it is: in a bundle of @kvkit/errors-catalog', async () => {
    const bundle = await browserBundle(new URL('../../errors-catalog/dist/index.js', import.meta.url));
    expect(probes.length).toBeGreaterThan(catalog.length * 3);
    expect(probes.filter((p) => !bundle.includes(p.phrase))).toEqual([]);
  });

  it('of @kvkit/kernels-wgsl carries no catalog prose and no WGSL comments, and stays under its bounds up front and in all', async () => {
    const chunks = await browserChunks(new URL('../dist/index.js', import.meta.url));
    const all = chunks.map((c) => c.code).join('\n');
    expect(all).toContain('createWebGpuBackend');
    expect(probes.filter((p) => all.includes(p.phrase))).toEqual([]);
    expect(wgslComments.length).toBeGreaterThan(20);
    expect(wgslComments.filter((c) => all.includes(c))).toEqual([]);
    const first = upFront(chunks);
    const later = chunks.filter((c) => !first.includes(c));
    // The backend's code is a chunk of its own, loaded by createWebGpuBackend, not up front.
    expect(later.length).toBeGreaterThan(0);
    expect(first.some((c) => c.code.includes('createComputePipelineAsync'))).toBe(false);
    for (const [what, list] of [['up front', first], ['loaded by createWebGpuBackend', later]] as const) {
      for (const c of list) console.log(`@kvkit/kernels-wgsl ${what}: ${c.fileName} ${c.code.length} B minified, ${gzipSync(c.code).length} B gzip`);
    }
    console.log(`@kvkit/kernels-wgsl browser bundle: up front ${gzipBytes(first)} B gzip, in all ${gzipBytes(chunks)} B gzip (${all.length} B minified)`);
    expect(gzipBytes(first)).toBeLessThanOrEqual(MAX_UP_FRONT_GZIP_BYTES);
    expect(gzipBytes(chunks)).toBeLessThan(MAX_ALL_GZIP_BYTES);
  });
});
