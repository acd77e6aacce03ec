import { canonicalCode } from './codes.js';

let docsBase: string | undefined;

/**
 * Where error pages are served, from `setDocsBase()` or else `KVKIT_DOCS_BASE` (Node); undefined when neither is
 * set (or set to ''), since kvkit has no site of its own that every user can reach: messages then carry no link.
 */
export function getDocsBase(): string | undefined {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.KVKIT_DOCS_BASE;
  const base = (docsBase ?? env)?.replace(/\/+$/, '');
  return base ? base : undefined;
}

/** `url` is where the docs site (apps/docs) is served, e.g. `http://localhost:4321/`; undefined falls back to `KVKIT_DOCS_BASE`. */
export function setDocsBase(url: string | undefined): void {
  docsBase = url;
}

/** The page of a code on the configured docs site; undefined while no docs base is set. */
export function docsUrl(code: string): string | undefined {
  const base = getDocsBase();
  return base === undefined ? undefined : `${base}/errors/${code.toLowerCase()}/`;
}

/** The catalog's CLI command that prints a code's whole entry, offline: how every message ends. */
export function explainCommand(code: string): string {
  return `npx kvkit explain ${canonicalCode(code) ?? code}`;
}
