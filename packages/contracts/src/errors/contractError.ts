import { errorTable } from '../generated/errors.js';
import type { ErrorEntry } from '../generated/errors.js';
import { canonicalCode } from './codes.js';
import { docsUrl, explainCommand } from './docsUrl.js';
import { render } from './render.js';

/**
 * The one error kvkit throws for a call that breaks an op's contract: thrown
 * before anything is enqueued for shape and dtype errors, and by `sync()` for
 * values found bad on the device.
 * Message: `[KV012] op: what is wrong, actual and expected. Bound dims. Run npx kvkit explain KV012`, or with a
 * docs base set (`KVKIT_DOCS_BASE`, `setDocsBase`), `... See <docs>/errors/kv012/ or run npx kvkit explain KV012`.
 * `explain(code)` of @kvkit/errors-catalog has the whole entry.
 */
export class ContractError extends Error {
  /** Always `'ContractError'`: what `isContractError` checks across copies of the package. */
  override readonly name = 'ContractError';
  /** The check's stable code, `KV` and three digits: `npx kvkit explain <code>` prints its entry. */
  readonly code: string;
  /** The call that failed: an op (`ropePoolFused`), a method (`materialize`) or a backend call (`tensor`, `sync`). */
  readonly op: string;
  /** The placeholder values of the message, and `dims`: every dim bound when the check failed. */
  readonly details: Readonly<Record<string, unknown>>;
  /** What to do, most likely first: the fixes the code's declaration lists. */
  readonly fixes: readonly string[];
  /** The code's page on the configured docs site; undefined while no docs base is set. */
  readonly docsUrl: string | undefined;

  /** The error of `code` raised by `op`: the message is rendered from the code's template with `details`, and ends with the bound `dims`. */
  constructor(code: string, op: string, details: Readonly<Record<string, unknown>> = {}, dims: Readonly<Record<string, number>> = {}) {
    const entry = entryOf(code);
    const what = entry ? render(entry.message, { op, ...details }) : `error ${code}`;
    const bound = Object.entries(dims)
      .map(([k, v]) => `${k}=${v}`)
      .join(' ');
    const url = docsUrl(code);
    const more = url === undefined ? `Run ${explainCommand(code)}` : `See ${url} or run ${explainCommand(code)}`;
    super(`[${code}] ${op}: ${what}.${bound ? ` ${bound}.` : ''} ${more}`);
    this.code = code;
    this.op = op;
    this.details = { ...details, dims: { ...dims } };
    this.fixes = entry?.fixes ?? [];
    this.docsUrl = url;
  }
}

/** The table's entry for a code in any usual spelling, as `explain()` reads codes. */
function entryOf(code: string): ErrorEntry | undefined {
  const key = canonicalCode(code);
  return key === undefined ? undefined : errorTable[key];
}

/** Whether `e` is a ContractError: by class, or by its name and `KV0xx` code where two copies of the package are loaded. */
export function isContractError(e: unknown): e is ContractError {
  return e instanceof ContractError || (e instanceof Error && /^KV\d{3}$/.test((e as { code?: string }).code ?? '') && e.name === 'ContractError');
}
