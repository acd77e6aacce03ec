import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, inject, it } from 'vitest';
import { attrValues, ids } from './support/html.js';
import { fileForPath, listFiles } from './support/site.js';

const siteDir = inject('siteDir');
const base = inject('siteBase');
const files = listFiles(siteDir);
const pages = files.filter((f) => f.endsWith('.html'));
const ORIGIN = 'http://site';

const cache = new Map<string, string>();
const read = (file: string) => {
  let text = cache.get(file);
  if (text === undefined) {
    text = readFileSync(file, 'utf8');
    cache.set(file, text);
  }
  return text;
};

/** Everything a page points at: links, scripts, images and stylesheets, and each candidate of a srcset. */
function refsOf(html: string): string[] {
  const srcsets = attrValues(html, 'srcset').flatMap((s) => s.split(',').map((c) => c.trim().split(/\s+/)[0] ?? ''));
  return [...attrValues(html, 'href'), ...attrValues(html, 'src'), ...srcsets].filter((r) => r !== '');
}

/** Outside the site (another origin, mail, inline data): not this crawl's to check. */
const isExternal = (ref: string) => /^(?:[a-z][a-z0-9+.-]*:|\/\/)/i.test(ref) && !ref.startsWith(`${ORIGIN}/`);

/** Where a reference on `fromUrl` lands: the file the build wrote for it, or why there is none. */
function resolve(ref: string, fromUrl: URL): { file?: string; url: URL; problem?: string } {
  const url = new URL(ref, fromUrl);
  if (!url.pathname.startsWith(base)) return { url, problem: `outside ${base}` };
  const file = fileForPath(siteDir, url.pathname.slice(base.length));
  if (!file) return { url, problem: 'no such file' };
  if (url.hash.length > 1 && file.endsWith('.html') && !ids(read(file)).has(decodeURIComponent(url.hash.slice(1)))) return { file, url, problem: 'no such anchor' };
  return { file, url };
}

const pageUrl = (file: string) => new URL(`${ORIGIN}${base}${file.replace(/(^|\/)index\.html$/, '$1')}`);

describe('link crawl of the built site', () => {
  it('from the home page (and the 404 page), every internal href, src and srcset resolves to a built file, every #anchor to an element', () => {
    const broken: string[] = [];
    const reached = new Set<string>();
    const queue = ['index.html', '404.html'].filter((f) => pages.includes(f));
    expect(queue[0]).toBe('index.html');
    for (const f of queue) reached.add(f);
    for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
      const from = pageUrl(file);
      for (const ref of refsOf(read(join(siteDir, file)))) {
        if (isExternal(ref)) continue;
        const hit = resolve(ref, from);
        if (hit.problem) {
          broken.push(`${file}: ${ref} (${hit.problem})`);
          continue;
        }
        const target = hit.file!.slice(siteDir.length).replace(/^[\\/]+/, '').split('\\').join('/');
        if (target.endsWith('.html') && !reached.has(target)) {
          reached.add(target);
          queue.push(target);
        }
      }
    }
    expect(broken, broken.join('\n')).toEqual([]);
    // Every page can be found by following links: none is only reachable by typing its address.
    const orphans = pages.filter((f) => !reached.has(f));
    expect(orphans, `not linked from any page reached from the home page: ${orphans.join(', ')}`).toEqual([]);
  });

  it('every url() in the built stylesheets resolves to a built file', () => {
    const broken: string[] = [];
    const sheets = files.filter((f) => f.endsWith('.css'));
    expect(sheets.length).toBeGreaterThan(0);
    for (const sheet of sheets) {
      const css = read(join(siteDir, sheet));
      for (const m of css.matchAll(/url\(\s*(?:(['"])(.*?)\1|([^)'"]*))\s*\)/g)) {
        const ref = (m[2] ?? m[3] ?? '').trim();
        if (ref === '' || ref.startsWith('#') || isExternal(ref)) continue;
        const hit = resolve(ref, new URL(`${ORIGIN}${base}${sheet}`));
        if (hit.problem) broken.push(`${sheet}: url(${ref}) (${hit.problem})`);
      }
    }
    expect(broken, broken.join('\n')).toEqual([]);
  });
});
