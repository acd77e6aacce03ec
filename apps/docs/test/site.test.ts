import { allOps } from '@kvkit/contracts';
import { catalog } from '@kvkit/errors-catalog';
import { describe, expect, it } from 'vitest';
import { buildSite } from '../src/pages.js';

const site = buildSite(catalog, allOps);

describe('docs site', () => {
  it('has a page for every code, with every section the error pages promise', () => {
    for (const e of catalog) {
      const html = site.get(`errors/${e.code.toLowerCase()}/index.html`);
      expect(html, e.code).toBeDefined();
      for (const section of ['Error message', 'What it means', 'Source', 'Solutions', 'Example fix', 'When it happens', 'Related errors']) {
        expect(html, `${e.code}: ${section}`).toContain(`<h2>${section}</h2>`);
      }
      expect(html).toContain(e.code);
    }
  });

  it('has a page for every op listing the codes it raises', () => {
    for (const op of allOps) expect(site.get(`ops/${op.name.replace(/\./g, '-')}/index.html`), op.name).toMatch(/errors\/kv\d{3}\//);
  });

  it('links only to pages that exist', () => {
    for (const [path, html] of site) {
      for (const [, href] of html.matchAll(/href="([^"]+)"/g)) {
        const target = new URL(href!, `https://site/${path}`).pathname.slice(1);
        const file = target === '' || target.endsWith('/') ? `${target}index.html` : target;
        expect(site.has(file), `${path} -> ${href}`).toBe(true);
      }
    }
  });
});
