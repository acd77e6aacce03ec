import type { CatalogEntry, ContractError } from '@kvkit/errors-catalog';
import { catalog, lookup } from '@kvkit/errors-catalog';
import ts from 'typescript';
import { describe, it } from 'vitest';

/**
 * The error index's examples are tests (the rustc error-index idea): every
 * catalog entry's `before` snippet must throw a ContractError with exactly its
 * own code, and its `after` snippet must run clean.
 *
 * Snippets are TypeScript bodies run inside an async function, so `await`
 * works; the names of `scope` are in scope (a snippet built with
 * `new Function` cannot `import`). Which backend an example needs is read off
 * the example itself: one that calls `createWebGpuBackend(` or
 * `createCudaBackend(` runs in that backend's package, every other on the CPU.
 * A subpath of its own (`@kvkit/conformance/catalog-examples`), so the suite
 * itself does not load the TypeScript compiler.
 */
export type ExampleBackend = 'cpu' | 'webgpu' | 'cuda';

export function exampleBackendOf(entry: CatalogEntry): ExampleBackend {
  const text = `${entry.example.before}\n${entry.example.after}`;
  if (text.includes('createWebGpuBackend(')) return 'webgpu';
  if (text.includes('createCudaBackend(')) return 'cuda';
  return 'cpu';
}

export interface CatalogExampleOptions {
  /** Names a snippet may use, made fresh for each snippet; `backend` among them is disposed (and synced after `after`). */
  readonly scope: () => Promise<Record<string, unknown>> | Record<string, unknown>;
  /** Why the examples cannot run here (no device, say); they are then registered as skipped, with the reason in their name. */
  readonly skipReason?: string;
  /** Only these codes: by default every live entry whose example needs `backend`. */
  readonly codes?: readonly string[];
}

type Snippet = (...values: unknown[]) => Promise<unknown>;
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as new (...params: string[]) => Snippet;

function compile(code: string, which: 'before' | 'after', source: string, names: readonly string[]): Snippet {
  const out = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ES2022, target: ts.ScriptTarget.ES2022 },
    reportDiagnostics: true,
    fileName: `${code}.${which}.ts`,
  });
  const problems = (out.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
  if (problems.length) throw new Error(`${code} ${which}: does not transpile: ${problems.join('; ')}`);
  // A snippet without imports is a script; drop a module marker if the compiler adds one.
  const body = out.outputText.replace(/^export \{\};?\s*$/m, '');
  return new AsyncFunction(...names, body);
}

interface Disposable {
  dispose(): void;
  sync(): Promise<void>;
}

/** Runs one snippet with a fresh scope; its `backend` is disposed afterwards whatever happens. */
async function run(entryCode: string, which: 'before' | 'after', source: string, options: CatalogExampleOptions): Promise<void> {
  const scope = await options.scope();
  const names = Object.keys(scope);
  const snippet = compile(entryCode, which, source, names);
  const backend = scope.backend as Disposable | undefined;
  try {
    await snippet(...names.map((n) => scope[n]));
    // Device-found errors surface at sync(); an `after` must leave none behind.
    if (which === 'after') await backend?.sync();
  } finally {
    backend?.dispose();
  }
}

function describeThrown(e: unknown): string {
  if (e instanceof Error) return `${e.name}${(e as { code?: string }).code ? ` ${(e as { code?: string }).code}` : ''}: ${e.message}`;
  return String(e);
}

/** Checks one entry's pair of examples; throws what is wrong. */
export async function checkCatalogExample(entry: CatalogEntry, options: CatalogExampleOptions): Promise<void> {
  const { code } = entry;
  if (!entry.example.before || !entry.example.after) throw new Error(`${code} lacks a before or an after example`);
  let thrown: unknown;
  try {
    await run(code, 'before', entry.example.before, options);
  } catch (e) {
    thrown = e;
  }
  if (thrown === undefined) throw new Error(`${code}: before did not throw`);
  const err = thrown as ContractError;
  if (err.code !== code || err.name !== 'ContractError') throw new Error(`${code}: before threw ${describeThrown(thrown)}`);
  if (!err.message.startsWith(`[${code}]`)) throw new Error(`message should start with [${code}]: ${err.message}`);

  // Every placeholder of the template is filled from details, so none shows as `{name}` in the message.
  const keys = Object.keys(err.details ?? {});
  const missing = entry.placeholders.filter((p) => !keys.includes(p));
  if (missing.length) throw new Error(`${code}: placeholders missing from details (${keys.join(', ')}): ${missing.join(', ')}`);

  // A user pasting the message without its code and closing pointer (link, CLI command) still lands on this page.
  const pasted = err.message.replace(/^\[KV\d{3}\] /, '').replace(/ (?:See \S+ or run|Run) npx kvkit explain \S+$/, '');
  const ranked = lookup(pasted, 3).map((m) => m.entry.code);
  if (!ranked.includes(code)) throw new Error(`${code}: lookup("${pasted}") ranked ${ranked.join(', ')}`);

  try {
    await run(code, 'after', entry.example.after, options);
  } catch (e) {
    throw new Error(`${code}: after threw ${describeThrown(e)}`);
  }
}

/** Registers one test per catalog example that needs `backend`. */
export function defineCatalogExamples(backend: ExampleBackend, options: CatalogExampleOptions): void {
  const entries = catalog.filter((e) => !e.retired && exampleBackendOf(e) === backend && (!options.codes || options.codes.includes(e.code)));
  describe(`catalog examples (${backend})`, () => {
    if (options.skipReason !== undefined) {
      for (const e of entries) it.skip(`${e.code}: skipped: ${options.skipReason}`, () => {});
      return;
    }
    for (const e of entries) it(`${e.code}: before throws its own code, after runs clean`, () => checkCatalogExample(e, options), 120_000);
  });
}
