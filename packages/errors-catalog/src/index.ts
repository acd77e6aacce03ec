export { catalog, explain } from './catalog.js';
export { ContractError, isContractError } from './contract-error.js';
export { docsUrl, getDocsBase, setDocsBase } from './docs-url.js';
export type { CatalogEntry } from './entry.js';
export { version } from './generated/catalog.js';
export { lookup, words } from './lookup.js';
export type { LookupMatch } from './lookup.js';
export { formatValue, render } from './render.js';
export { formatEntry } from './format-entry.js';
