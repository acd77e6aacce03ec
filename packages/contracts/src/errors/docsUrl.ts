import { version } from '../generated/errors.js';

let docsBase: string | undefined;

/** Where error pages live; defaults to the docs of this exact version. `KVKIT_DOCS_BASE` (Node) or `setDocsBase()` moves it. */
export function getDocsBase(): string {
  const env = (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env?.KVKIT_DOCS_BASE;
  return (docsBase ?? env ?? `https://kvkit.dev/v${version}`).replace(/\/+$/, '');
}

export function setDocsBase(url: string | undefined): void {
  docsBase = url;
}

export function docsUrl(code: string): string {
  return `${getDocsBase()}/errors/${code.toLowerCase()}/`;
}
