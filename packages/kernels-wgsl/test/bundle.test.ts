/**
 * What a web app ships when it imports this package: the built entry bundled
 * for the browser by Vite, minified. `ContractError` renders its messages from
 * the small table in @kvkit/contracts, so none of the catalog's prose (what a
 * code means, when it happens, its situations) may come along, and the size
 * stays under the figure the README promises.
 */
import { fileURLToPath } from 'node:url';
import { gzipSync } from 'node:zlib';
import { catalog } from '@kvkit/errors-catalog';
import { build } from 'vite';
import { describe, expect, it } from 'vitest';

/** The README's bound, in bytes: 66.3 kB with the f16 probe, strided views, wrap(), mRoPE (the materializer's too), the Q/K-norm kernel, the fp8 and paged pools (written by the row kernels), exact scaled angles, the value-check pass, submits for the application's buffers and chunked reads; the catalog's prose would add some 22 kB. */
const MAX_GZIP_BYTES = 67_000;

async function browserBundle(entry: URL): Promise<string> {
  const result = await build({
    configFile: false,
    logLevel: 'silent',
    build: { lib: { entry: fileURLToPath(entry), formats: ['es'], fileName: 'bundle' }, write: false, minify: true, target: 'es2022' },
  });
  const outputs = (Array.isArray(result) ? result : [result]) as { output: { type: string; code?: string }[] }[];
  return outputs
    .flatMap((o) => o.output)
    .map((chunk) => (chunk.type === 'chunk' ? chunk.code! : ''))
    .join('\n');
}

/** Stretches of plain words from every entry's prose: a minifier may re-quote a string or escape a symbol, never these. */
const probes = catalog
  .flatMap((e) => [e.meaning, e.whenItHappens, ...e.situations].map((text) => ({ code: e.code, phrase: longestPlainRun(text) })))
  .filter((p) => p.phrase.length >= 24);

function longestPlainRun(text: string): string {
  return (text.match(/[A-Za-z0-9 ,.;:()]+/g) ?? []).map((s) => s.trim()).reduce((a, b) => (b.length > a.length ? b : a), '');
}

describe('browser bundle', () => {
  it('finds the prose where it is: in a bundle of @kvkit/errors-catalog', async () => {
    const bundle = await browserBundle(new URL('../../errors-catalog/dist/index.js', import.meta.url));
    expect(probes.length).toBeGreaterThan(catalog.length * 3);
    expect(probes.filter((p) => !bundle.includes(p.phrase))).toEqual([]);
  });

  it('of @kvkit/kernels-wgsl carries no catalog prose and stays under its bound', async () => {
    const bundle = await browserBundle(new URL('../dist/index.js', import.meta.url));
    expect(bundle).toContain('createWebGpuBackend');
    expect(probes.filter((p) => bundle.includes(p.phrase))).toEqual([]);
    const gzip = gzipSync(bundle).length;
    console.log(`@kvkit/kernels-wgsl browser bundle: ${bundle.length} B minified, ${gzip} B gzip`);
    expect(gzip).toBeLessThan(MAX_GZIP_BYTES);
  });
});
