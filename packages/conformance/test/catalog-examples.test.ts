/**
 * The error index's examples are tests (the rustc error-index idea): every
 * catalog entry's `before` snippet must throw a ContractError with exactly its
 * own code, and its `after` snippet must run clean, on the CPU reference backend.
 *
 * Snippets are TypeScript bodies run inside an async function, so `await`
 * works; `backend` (a fresh CPU backend) is in scope, and so is
 * `createCpuBackend`, which only the cross-backend example (KV002) needs: a
 * snippet built with `new Function` cannot `import` anything.
 */
import type { CatalogEntry, ContractError } from '@kvkit/errors-catalog';
import { catalog, lookup } from '@kvkit/errors-catalog';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

type Snippet = (backend: unknown, makeBackend: typeof createCpuBackend) => Promise<unknown>;

const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...params: string[]) => Snippet;

function compile(code: string, which: 'before' | 'after', source: string): Snippet {
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
    fileName: `${code}.${which}.ts`,
  });
  const problems = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  if (problems.length) throw new Error(`${code} ${which}: does not transpile: ${problems.join('; ')}`);
  // A snippet without imports is a script; drop a module marker if the compiler adds one.
  const body = out.outputText.replace(/^export \{\};?\s*$/m, '');
  return new AsyncFunction('backend', 'createCpuBackend', body);
}

/** Runs one snippet on a fresh backend, which is disposed afterwards whatever happens. */
async function run(snippet: Snippet, settle: boolean): Promise<void> {
  const backend = createCpuBackend();
  try {
    await snippet(backend, createCpuBackend);
    // Device-found errors surface at sync(); an `after` must leave none behind.
    if (settle) await backend.sync();
  } finally {
    backend.dispose();
  }
}

function describeThrown(e: unknown): string {
  if (e instanceof Error) return `${e.name}${(e as { code?: string }).code ? ` ${(e as { code?: string }).code}` : ''}: ${e.message}`;
  return String(e);
}

const entries: [string, CatalogEntry][] = catalog.filter((e) => !e.retired).map((e) => [e.code, e]);

describe('catalog examples (CPU backend)', () => {
  it('has entries to run', () => {
    expect(entries.length).toBeGreaterThan(0);
  });

  it.each(entries)('%s: before throws its own code, after runs clean', async (code, entry) => {
    expect(entry.example.before, `${code} has no before example`).not.toBe('');
    expect(entry.example.after, `${code} has no after example`).not.toBe('');
    const before = compile(code, 'before', entry.example.before);
    const after = compile(code, 'after', entry.example.after);

    let thrown: unknown;
    try {
      await run(before, false);
    } catch (e) {
      thrown = e;
    }
    expect(thrown, `${code}: before did not throw`).toBeDefined();
    const err = thrown as ContractError;
    expect(err.code, `${code}: before threw ${describeThrown(thrown)}`).toBe(code);
    expect(err.name, `${code}: before threw ${describeThrown(thrown)}`).toBe('ContractError');
    expect(err.message.startsWith(`[${code}]`), `message should start with [${code}]: ${err.message}`).toBe(true);

    // Every placeholder of the template is filled from details, so none shows as `{name}` in the message.
    const keys = Object.keys(err.details ?? {});
    const missing = entry.placeholders.filter((p) => !keys.includes(p));
    expect(missing, `${code}: placeholders missing from details (${keys.join(', ')})`).toEqual([]);

    // A user pasting the message without its code and link still lands on this page.
    const pasted = err.message.replace(/^\[KV\d{3}\] /, '').replace(/ See \S+$/, '');
    const ranked = lookup(pasted, 3).map((m) => m.entry.code);
    expect(ranked, `${code}: lookup("${pasted}")`).toContain(code);

    try {
      await run(after, true);
    } catch (e) {
      expect.fail(`${code}: after threw ${describeThrown(e)}`);
    }
  });
});
