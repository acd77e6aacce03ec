import { canonicalCode } from '@kvkit/contracts/dsl';
import type { CatalogEntry } from './entry.js';
import { entries } from './generated/catalog.js';

/** Every code, in code order; retired codes stay, marked. */
export const catalog: readonly CatalogEntry[] = entries;

const byCode = new Map(entries.map((e) => [e.code, e]));

/** The whole entry for a code (`KV012`, `kv012` or `12`), or undefined for a code that does not exist. */
export function explain(code: string): CatalogEntry | undefined {
  const key = canonicalCode(code);
  return key === undefined ? undefined : byCode.get(key);
}
