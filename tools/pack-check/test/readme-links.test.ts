import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = fileURLToPath(new URL('../../..', import.meta.url));
const SKIP = new Set(['node_modules', 'dist', '.git', '.turbo', '.test-results', '.astro']);

/** Every README.md of the repository, outside installed and built folders. */
function readmes(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    if (d.isDirectory()) return SKIP.has(d.name) || d.name.startsWith('.') ? [] : readmes(join(dir, d.name));
    return d.name === 'README.md' ? [join(dir, d.name)] : [];
  });
}

/** Link targets of a markdown file, inline `[text](target)` and reference `[label]: target`, outside code. */
function linkTargets(markdown: string): string[] {
  const prose = markdown.replace(/```[\s\S]*?```/g, '').replace(/`[^`\n]*`/g, '');
  const inline = [...prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1]!);
  const reference = [...prose.matchAll(/^\s*\[[^\]]+\]:\s*(\S+)/gm)].map((m) => m[1]!);
  return [...inline, ...reference];
}

const isExternal = (target: string) => /^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#');

const files = readmes(root);

describe('README links', () => {
  it('finds the READMEs of the root and of the packages', () => {
    const names = files.map((f) => relative(root, f));
    for (const expected of ['README.md', 'packages/contracts/README.md', 'packages/kernels-cpu/README.md', 'apps/docs/README.md']) expect(names).toContain(expected);
  });

  it.each(files.map((f) => [relative(root, f), f] as const))('every relative link of %s names a file of the repository', (_, file) => {
    const broken = linkTargets(readFileSync(file, 'utf8'))
      .filter((t) => !isExternal(t))
      .map((t) => decodeURIComponent(t.replace(/[#?].*$/, '')))
      .filter((t) => t !== '')
      .filter((t) => {
        const target = resolve(dirname(file), t);
        return !target.startsWith(root) || !existsSync(target);
      });
    expect(broken).toEqual([]);
  });

  it.each(files.map((f) => [relative(root, f), f] as const))('%s sends readers to no design note outside the repository', (_, file) => {
    const text = readFileSync(file, 'utf8');
    expect(text.match(/shared\/design|\b(?:SEMANTICS|ARCHITECTURE|PERFORMANCE|STYLE|API)\.md\b/g) ?? []).toEqual([]);
  });
});

describe('the link finder', () => {
  it('reads inline and reference links, and skips code', () => {
    expect(linkTargets('see [a](x/y.md#part)\n[b]: ../z.ts\n`[c](not-a-link)`\n```\n[d](nor-this)\n```')).toEqual(['x/y.md#part', '../z.ts']);
  });
});
