export { catalog, explain } from './catalog.js';
export type { CatalogEntry } from './entry.js';
export { version } from './generated/catalog.js';
export { lookup, words } from './lookup.js';
export type { LookupMatch } from './lookup.js';
export { formatEntry } from './format-entry.js';
// The error and its docs links live in @kvkit/contracts; re-exported so imports from here keep working (the same class, so `instanceof` holds).
export { ContractError, docsUrl, explainCommand, getDocsBase, isContractError, setDocsBase } from '@kvkit/contracts';
export { formatValue, render } from '@kvkit/contracts/dsl';
