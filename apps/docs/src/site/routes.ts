/**
 * Page paths, relative to the site's base. `/errors/<code>/` is the path
 * `ContractError.docsUrl` names, so it must never change shape.
 */
export const errorPath = (code: string): string => `errors/${code.toLowerCase()}/`;

/** `KvMaterializer.materialize` -> `KvMaterializer-materialize`: a dot in a path segment reads like a file extension to some servers. */
export const opSlug = (op: string): string => op.replace(/\./g, '-');
export const opPath = (op: string): string => `ops/${opSlug(op)}/`;

export const lookupPath = 'lookup/';
/** The page that runs every op in the reader's browser (WebGPU, else the CPU backend). */
export const tryPath = 'try/';
export const benchmarksPath = 'benchmarks/';
export const kernelsPath = 'kernels/';
export const gettingStartedPath = 'getting-started/';
export const contractErrorPath = 'contract-error/';
export const changelogPath = 'changelog/';
export const apiIndexPath = 'api/';
/** A package's API page: `api/kernels-wgsl/` for @kvkit/kernels-wgsl (its folder under packages/). */
export const apiPath = (dir: string): string => `api/${dir}/`;

/** Joins the configured base (`/` or `/v0.1.0/`) and a page path. */
export function withBase(base: string, path: string): string {
  return `${base.replace(/\/*$/, '/')}${path.replace(/^\/+/, '')}`;
}
