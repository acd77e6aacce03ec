import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { catalog } from '../src/catalog.js';
import { orphanEntries } from '../src/generated/catalog.js';
import { SECTIONS } from '../scripts/parse-entry.js';

/**
 * rustc-style tidy checks over the whole catalog. That every example really
 * throws its code is checked where a backend exists to run it
 * (packages/conformance/test/catalog-examples.test.ts).
 */
const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const codes = catalog.map((e) => e.code);

describe('catalog tidy', () => {
  it('has codes of the form KV + three digits, each once, in order', () => {
    for (const c of codes) expect(c).toMatch(/^KV\d{3}$/);
    expect(new Set(codes).size).toBe(codes.length);
    expect([...codes].sort()).toEqual(codes);
  });

  it('has no prose file for a code that no contract declares', () => {
    expect(orphanEntries).toEqual([]);
  });

  it.each(catalog.map((e) => [e.code, e] as const))('%s has every section of its prose entry', (code, e) => {
    const md = readFileSync(new URL(`../entries/${code}.md`, import.meta.url), 'utf8');
    for (const section of SECTIONS) expect(md, `${code}: ## ${section}`).toMatch(new RegExp(`^## ${section}\\s*$`, 'm'));
    expect(md, `${code}: its solutions are the \`fixes\` of its declaration in packages/contracts/src/ops, not a section here`).not.toMatch(/^## Solutions\s*$/m);
    expect(e.meaning.length, 'meaning').toBeGreaterThan(40);
    expect(e.whenItHappens.length, 'when it happens').toBeGreaterThan(20);
    expect(e.situations.length, 'situations').toBeGreaterThan(0);
    expect(e.solutions.length, 'solutions').toBeGreaterThan(0);
    expect(e.example.before, 'example before').not.toBe('');
    expect(e.example.after, 'example after').not.toBe('');
    expect(e.example.before).not.toBe(e.example.after);
  });

  it.each(catalog.map((e) => [e.code, e] as const))('%s links only to codes that exist, never to itself', (code, e) => {
    expect(e.related.length).toBeGreaterThan(0);
    for (const r of e.related) {
      expect(codes, `${code} -> ${r}`).toContain(r);
      expect(r).not.toBe(code);
    }
  });

  it.each(catalog.map((e) => [e.code, e] as const))('%s is raised by a validator or a declared backend call (none, once retired) and declared where its source says', (code, e) => {
    if (e.retired) expect(e.raisedBy, `${code} is retired but still raised`).toEqual([]);
    else expect(e.raisedBy.length, `${code} is raised nowhere`).toBeGreaterThan(0);
    const line = readFileSync(`${repoRoot}${e.source.file}`, 'utf8').split('\n')[e.source.line - 1];
    expect(line).toContain(`${code}:`);
  });

  it('names where each upstream wording comes from', () => {
    const all = catalog.flatMap((e) => e.upstream.map((u) => ({ code: e.code, ...u })));
    for (const u of all.filter((w) => w.source)) {
      expect(u.source, `${u.code}: ${u.message}`).toMatch(/^(vLLM|SGLang|FlashInfer|PyTorch|transformers), [\w.-]+\/[\w.-]+ \S/);
    }
    // Only the first catalog's wordings lack a source; a new one must say where it is from.
    expect(all.filter((w) => !w.source).length).toBeLessThanOrEqual(35);
    for (const e of catalog) expect(e.upstreamMessages).toEqual(e.upstream.map((u) => u.message));
  });

  it.each(catalog.map((e) => [e.code, e] as const))('%s lists exactly the placeholders of its template', (_code, e) => {
    const inTemplate = [...new Set([...e.message.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))];
    expect(e.placeholders).toEqual(inTemplate);
  });
});
