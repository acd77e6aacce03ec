/**
 * The guide around the reference: Getting started as the front door, previous/next links in the sidebar's
 * order on every page, the version line from the packages' package.json, and the changelog's entry for it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { allOps } from '@kvkit/contracts/dsl';
import { catalog } from '@kvkit/errors-catalog';
import { describe, expect, inject, it } from 'vitest';
import { publicPackages, versionLine } from '../src/site/packages.js';
import { apiPath, changelogPath, contractErrorPath, gettingStartedPath } from '../src/site/routes.js';
import { sidebar } from '../src/site/sidebar.js';
import { attrValues, h1, mainContent, textOf } from './support/html.js';
import { docsRoot, listFiles, pageAt as builtPage } from './support/site.js';

const siteDir = inject('siteDir');
const base = inject('siteBase');
const pageAt = (path: string) => builtPage(siteDir, path);
const norm = (s: string) => s.replace(/\s+/g, ' ').trim();
const packages = publicPackages();

/** The sidebar's links in order, as Starlight flattens them for previous/next. */
function sidebarOrder(): { label: string; path: string }[] {
  const flat: { label: string; path: string }[] = [];
  const walk = (items: ReturnType<typeof sidebar>) => {
    for (const i of items) {
      if ('items' in i) walk(i.items);
      else flat.push({ label: i.label, path: i.link.replace(/^\//, '') });
    }
  };
  walk(sidebar(catalog, allOps, packages));
  return flat;
}

/** The footer's previous/next link of a page: its href and label. */
function paginationLink(html: string, rel: 'prev' | 'next'): { href: string; label: string } | undefined {
  const m = new RegExp(`<a href="([^"]*)" rel="${rel}"[^>]*>([\\s\\S]*?)</a>`).exec(html);
  if (!m) return undefined;
  return { href: m[1]!, label: textOf(/<span class="link-title[^"]*">([\s\S]*?)<\/span>/.exec(m[2]!)?.[1] ?? '') };
}

describe('the guide pages exist', () => {
  it.each([
    [gettingStartedPath, 'Getting started'],
    [changelogPath, 'Changelog'],
    [contractErrorPath, 'Reading a ContractError'],
    ['api/', 'API reference'],
  ])('%s', (path, title) => {
    const html = pageAt(path);
    expect(html, `${path} was not built`).toBeDefined();
    expect(h1(html!)).toBe(title);
  });

  it('Getting started covers installing for each environment, the first call and reading an error', () => {
    const html = pageAt(gettingStartedPath)!;
    const headings = [...mainContent(html).matchAll(/<h([23])[^>]*id="([^"]+)"/g)].map((m) => m[2]);
    for (const id of ['install', 'node-on-the-cpu', 'node-on-a-gpu-through-dawn-webgpu', 'in-a-browser', 'node-on-an-nvidia-gpu-cuda', 'the-first-call', 'reading-an-error']) {
      expect(headings, id).toContain(id);
    }
    const hrefs = attrValues(mainContent(html), 'href').map((h) => new URL(h, `http://site${base}${gettingStartedPath}`).pathname + new URL(h, `http://site${base}${gettingStartedPath}`).hash);
    expect(hrefs).toContain(`${base}${contractErrorPath}`);
    expect(hrefs).toContain(`${base}${apiPath('contracts')}#Backend`);
  });
});

describe('the home page', () => {
  it('links Getting started first, as the front door, and points its next link there', () => {
    const html = pageAt('')!;
    const content = /<div class="sl-markdown-content">([\s\S]*?)<\/div>\s*<footer/.exec(mainContent(html))?.[1] ?? mainContent(html);
    const first = attrValues(content, 'href').find((h) => !h.startsWith('#'));
    expect(first && new URL(first, `http://site${base}`).pathname).toBe(`${base}${gettingStartedPath}`);
    const next = paginationLink(html, 'next');
    expect(next?.label).toBe('Getting started');
    expect(new URL(next!.href, `http://site${base}`).pathname).toBe(`${base}${gettingStartedPath}`);
  });
});

describe('previous/next links', () => {
  const order = sidebarOrder();

  it('the sidebar starts with the guide: Getting started, then Reading a ContractError; the API pages and the changelog are in it', () => {
    expect(order.slice(0, 2).map((o) => o.path)).toEqual([gettingStartedPath, contractErrorPath]);
    expect(order.map((o) => o.path)).toContain(changelogPath);
    const api = order.filter((o) => o.path.startsWith('api/')).map((o) => o.path);
    expect(api).toEqual(['api/', ...packages.map((p) => apiPath(p.dir))]);
  });

  it.each(order.map((o, i) => [o.path, i] as const))('%s links its neighbours in the sidebar', (path, i) => {
    const html = pageAt(path);
    expect(html, `${path} was not built`).toBeDefined();
    const prev = paginationLink(html!, 'prev');
    const next = paginationLink(html!, 'next');
    if (i === 0) expect(prev).toBeUndefined();
    else expect(prev, `${path}: previous`).toEqual({ href: `${base}${order[i - 1]!.path}`, label: order[i - 1]!.label });
    if (i === order.length - 1) expect(next).toBeUndefined();
    else expect(next, `${path}: next`).toEqual({ href: `${base}${order[i + 1]!.path}`, label: order[i + 1]!.label });
  });
});

describe('the version', () => {
  const line = versionLine(packages);

  it('every package is at the version the site states', () => {
    const versions = new Set(packages.map((p) => JSON.parse(readFileSync(join(docsRoot, '..', '..', 'packages', p.dir, 'package.json'), 'utf8')).version));
    expect(versions.size).toBe(1);
    expect(line).toBe(`kvkit ${[...versions][0]}`);
  });

  it('every page ends with the version line and a link to the changelog', () => {
    const pages = listFiles(siteDir).filter((f) => f.endsWith('.html') && f !== '404.html');
    expect(pages.length).toBeGreaterThan(catalog.length);
    for (const file of pages) {
      const html = readFileSync(join(siteDir, file), 'utf8');
      const m = /<p class="kv-version-line">([\s\S]*?)<\/p>/.exec(html);
      expect(m, `${file}: no version line`).not.toBeNull();
      expect(norm(textOf(m![1]!)), file).toContain(`These pages describe ${line}`);
      expect(attrValues(m![1]!, 'href'), file).toContain(`${base}${changelogPath}`);
    }
  });

  it("the changelog's newest entry is that version, and names every published package", () => {
    const source = readFileSync(join(docsRoot, 'src', 'content', 'docs', 'changelog.md'), 'utf8');
    const entries = [...source.matchAll(/^## (.+)$/gm)].map((m) => m[1]!.trim());
    expect(entries[0]).toBe(packages[0]!.version);
    const newest = source.slice(source.indexOf(`## ${entries[0]}`)).split(/^## /m)[1]!;
    for (const p of packages) expect(newest, p.name).toContain(`\`${p.name}\``);
    expect(norm(textOf(mainContent(pageAt(changelogPath)!)))).toContain(packages[0]!.version);
  });
});
