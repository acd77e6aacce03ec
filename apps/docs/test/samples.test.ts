/**
 * The Getting started page's samples, taken from its Markdown source: every ```ts block compiles against the
 * workspace packages as a user's strict project would; each `// @ts-expect-error KV0xx` marks a line tsc rejects
 * with that code; the samples that need no GPU run in Node and print what the page says they print; every
 * install command names a published package (and Dawn at the version kernels-wgsl pins). The built page is
 * checked to show each sample.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { publicPackages } from '../src/site/packages.js';
import { gettingStartedPath } from '../src/site/routes.js';
import { mainContent, textOf } from './support/html.js';
import { compileSamples, fencedBlocks, runSample } from './support/samples.js';
import { docsRoot, fileForPath } from './support/site.js';

const page = join(docsRoot, 'src', 'content', 'docs', 'getting-started.md');
const blocks = fencedBlocks(readFileSync(page, 'utf8'));
const samples = blocks.filter((b) => b.lang === 'ts');
const EXPECT_ERROR = /^\s*\/\/ @ts-expect-error (KV\d{3})\b/;
/** Samples that run here: no GPU package imported, no line that must fail to compile. */
const GPU_PACKAGES = /from '@kvkit\/kernels-(wgsl|cuda)'/;
const runnable = samples.filter((s) => !GPU_PACKAGES.test(s.code) && !s.code.split('\n').some((l) => EXPECT_ERROR.test(l)));

describe('Getting started: the samples', () => {
  it('has samples for each environment, the first call and reading an error', () => {
    const imports = samples.map((s) => s.code).join('\n');
    for (const pkg of ['@kvkit/kernels-cpu', '@kvkit/kernels-wgsl', '@kvkit/kernels-cuda', '@kvkit/contracts']) expect(imports).toContain(`from '${pkg}'`);
    expect(imports).toMatch(/backend\.tensor\(/);
    expect(imports).toMatch(/await backend\.read\(/);
    expect(imports).toContain('navigator.gpu');
    expect(runnable.length).toBeGreaterThanOrEqual(2);
  });

  it('every TypeScript sample compiles against the workspace packages (strict, no skipLibCheck)', () => {
    expect(compileSamples(samples)).toEqual([]);
  }, 180_000);

  it('each @ts-expect-error marks a line tsc rejects with the code it names', () => {
    const marked = samples.flatMap((s) =>
      s.code.split('\n').flatMap((l, i) => {
        const code = EXPECT_ERROR.exec(l)?.[1];
        return code ? [{ sample: s, at: i, code }] : [];
      }),
    );
    expect(marked.length).toBeGreaterThan(0);
    // Without the directive, the line after it is an error naming the code.
    const variants = marked.map(({ sample, at }) => ({ name: `${sample.name}-without-directive-${at}`, code: sample.code.split('\n').filter((_, i) => i !== at).join('\n') }));
    const diagnostics = compileSamples(variants);
    marked.forEach(({ at, code }, i) => {
      const found = diagnostics.filter((d) => d.sample === variants[i]!.name && d.line === at + 1);
      expect(found.map((d) => d.text).join('\n'), `${variants[i]!.name}: line ${at + 1}`).toContain(`"${code}"`);
    });
  }, 180_000);

  it.each(runnable.map((s) => [s.name, s] as const))('%s runs, and prints what the page says', async (_, sample) => {
    const run = await runSample(sample.code);
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    if (sample.output !== undefined) expect(run.stdout.trimEnd()).toBe(sample.output.trimEnd());
    else expect(run.stdout.length).toBeGreaterThan(0);
  }, 60_000);

  it('every install command names published packages, and Dawn at the version kernels-wgsl pins', () => {
    const packages = publicPackages();
    const names = new Set(packages.map((p) => p.name));
    const peers = new Map(packages.flatMap((p) => Object.entries(p.peers)));
    const installs = blocks.filter((b) => b.lang === 'sh').flatMap((b) => b.code.split('\n').filter((l) => l.startsWith('npm install ')));
    expect(installs.length).toBe(4);
    for (const line of installs) {
      for (const spec of line.replace(/#.*/, '').trim().split(/\s+/).slice(2)) {
        const at = spec.lastIndexOf('@');
        const [name, version] = at > 0 ? [spec.slice(0, at), spec.slice(at + 1)] : [spec, undefined];
        if (names.has(name)) continue;
        expect(peers.get(name), `${line}: ${spec} is neither a published kvkit package nor a peer dependency`).toBeDefined();
        expect(version, `${line}: ${name} at the pinned version`).toBe(peers.get(name));
      }
    }
  });

  it('the built page shows every sample, line for line', () => {
    const file = fileForPath(inject('siteDir'), gettingStartedPath);
    expect(file, 'getting-started/ was not built').toBeDefined();
    const text = textOf(mainContent(readFileSync(file!, 'utf8'))).replace(/\s+/g, ' ');
    for (const b of blocks) for (const line of b.code.split('\n').filter((l) => l.trim())) expect(text, b.name).toContain(line.trim().replace(/\s+/g, ' '));
  });
});
