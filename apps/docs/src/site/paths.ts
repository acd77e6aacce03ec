import { resolve } from 'node:path';

/** The repository's web view that "Source" links open; override with KVKIT_REPO_URL (and KVKIT_REPO_REF for the branch or tag). */
export const REPO_URL = (process.env.KVKIT_REPO_URL ?? 'https://github.com/kvkit/kvkit').replace(/\/+$/, '');
export const REPO_REF = process.env.KVKIT_REPO_REF ?? 'main';

/** The monorepo root: Astro runs with apps/docs as its working directory. */
export const repoRoot = resolve(process.env.KVKIT_REPO_ROOT ?? resolve(process.cwd(), '..', '..'));

/** Committed benchmark runs, charted at build time; KVKIT_BENCH_RESULTS points elsewhere (the tests use a fixture). */
export const benchResultsDir = resolve(process.env.KVKIT_BENCH_RESULTS ?? resolve(repoRoot, 'bench', 'results'));

/** A file of the repository, as its web view shows it, at a line. */
export function repoFileUrl(file: string, line?: number): string {
  return `${REPO_URL}/blob/${REPO_REF}/${file}${line ? `#L${line}` : ''}`;
}
