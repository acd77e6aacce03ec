import { readFileSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { allErrors, canonicalCode, render } from '../src/dsl/index.js';
import { errorTable, version } from '../src/generated/errors.js';
import { ContractError, docsUrl, explainCommand, getDocsBase, isContractError, setDocsBase } from '../src/index.js';

/** `ContractError` renders from the generated table alone: its template, its fixes, and a link only where a docs base is set. */
describe('ContractError', () => {
  afterEach(() => setDocsBase(undefined));

  it('renders the template, the bound dims and the CLI command that explains the code', () => {
    const e = new ContractError('KV014', 'fusedNormRopeStacked', { arg: 'kOut', actual: [4, 2, 2, 8], expected: '[L, T, H, D] = [2, 4, 2, 8]' }, { H: 2, D: 8, T: 4, L: 2 });
    expect(e.message).toBe(
      '[KV014] fusedNormRopeStacked: kOut has shape [4, 2, 2, 8]; expected [L, T, H, D] = [2, 4, 2, 8]. H=2 D=8 T=4 L=2. Run npx kvkit explain KV014',
    );
    expect(e.name).toBe('ContractError');
    expect(e.details).toEqual({ arg: 'kOut', actual: [4, 2, 2, 8], expected: '[L, T, H, D] = [2, 4, 2, 8]', dims: { H: 2, D: 8, T: 4, L: 2 } });
    expect(e.fixes).toEqual(allErrors.KV014!.fixes);
    expect(isContractError(e)).toBe(true);
    expect(isContractError(new TypeError('x'))).toBe(false);
  });

  it('links no docs site while none is set', () => {
    expect(getDocsBase()).toBeUndefined();
    expect(docsUrl('KV014')).toBeUndefined();
    const e = new ContractError('KV014', 'fusedNormRopeStacked');
    expect(e.docsUrl).toBeUndefined();
    expect(e.message).not.toMatch(/https?:/);
    setDocsBase('');
    expect(new ContractError('KV014', 'fusedNormRopeStacked').docsUrl).toBeUndefined();
  });

  it('reads the docs base from KVKIT_DOCS_BASE, with setDocsBase taking precedence', () => {
    const before = process.env.KVKIT_DOCS_BASE;
    try {
      process.env.KVKIT_DOCS_BASE = 'https://docs.example.test/kvkit/v1/';
      expect(new ContractError('KV012', 'op').docsUrl).toBe('https://docs.example.test/kvkit/v1/errors/kv012/');
      setDocsBase('http://localhost:4321');
      expect(new ContractError('KV012', 'op').docsUrl).toBe('http://localhost:4321/errors/kv012/');
    } finally {
      if (before === undefined) delete process.env.KVKIT_DOCS_BASE;
      else process.env.KVKIT_DOCS_BASE = before;
    }
  });

  it('pins the generated table to the version in package.json', () => {
    const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string };
    expect(version).toBe(pkg.version);
  });

  it('leaves a message without dims when none were bound, and links the docs base once one is set', () => {
    setDocsBase('http://localhost:4321/');
    const e = new ContractError('KV003', 'read', { arg: 'tensor' });
    expect(e.message).toBe('[KV003] read: tensor was disposed and can no longer be used. See http://localhost:4321/errors/kv003/ or run npx kvkit explain KV003');
    expect(e.docsUrl).toBe('http://localhost:4321/errors/kv003/');
    expect(e.docsUrl).toBe(docsUrl('KV003'));
  });

  it('reads a code in any usual spelling and names an unknown one without guessing', () => {
    expect(new ContractError('kv12', 'op', { arg: 'w', actual: [3], expected: '[2, 8]' }).message).toBe('[kv12] op: w has shape [3]; expected [2, 8]. Run npx kvkit explain KV012');
    expect(explainCommand('12')).toBe('npx kvkit explain KV012');
    expect(canonicalCode('12')).toBe('KV012');
    expect(canonicalCode('hello')).toBeUndefined();
    const unknown = new ContractError('KV999', 'op');
    expect(unknown.message).toBe('[KV999] op: error KV999. Run npx kvkit explain KV999');
    expect(unknown.fixes).toEqual([]);
  });
});

describe('the generated error table', () => {
  it('holds every declared code with its template and fixes, and nothing more', () => {
    expect(Object.keys(errorTable).sort()).toEqual(Object.keys(allErrors).sort());
    for (const [code, decl] of Object.entries(allErrors)) {
      const placeholders = [...new Set([...decl.message.matchAll(/\{(\w+)\}/g)].map((m) => m[1]))];
      expect(errorTable[code], code).toEqual({ message: decl.message, fixes: decl.fixes });
      // Filling every placeholder leaves no `{name}` behind.
      expect(render(decl.message, Object.fromEntries(placeholders.map((p) => [p, 'x']))), code).not.toMatch(/\{\w+\}/);
      if (!decl.retired) expect(decl.fixes.length, `${code} fixes`).toBeGreaterThan(0);
    }
  });
});
