import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { buildSite, docsRoot } from './support/site.js';

declare module 'vitest' {
  export interface ProvidedContext {
    siteDir: string;
    siteBase: string;
  }
}

/** A base other than `/`, so a link that forgets the base fails the link checks. */
const SITE_BASE = '/v0.1.0/';

/** One build of the site for every test file: under a versioned base, charting the fixture benchmark results. */
export default async function setup(project: TestProject): Promise<() => void> {
  const siteDir = mkdtempSync(join(tmpdir(), 'kvkit-docs-site-'));
  const ms = await buildSite(siteDir, {
    KVKIT_DOCS_SITE_BASE: SITE_BASE,
    KVKIT_BENCH_RESULTS: join(docsRoot, 'test', 'fixtures', 'bench'),
  });
  console.log(`docs: test build of the site in ${(ms / 1000).toFixed(1)} s`);
  project.provide('siteDir', siteDir);
  project.provide('siteBase', SITE_BASE);
  return () => rmSync(siteDir, { recursive: true, force: true });
}
