import starlight from '@astrojs/starlight';
import { allOps } from '@kvkit/contracts/dsl';
import { catalog } from '@kvkit/errors-catalog';
import { defineConfig } from 'astro/config';
import { sidebar } from './src/site/sidebar';

/** Where the site is served: `/` by default, `/v0.1.0/` to sit beside other versions (the path ContractError.docsUrl uses). */
const base = process.env.KVKIT_DOCS_SITE_BASE ?? '/';

export default defineConfig({
  base,
  ...(process.env.KVKIT_DOCS_SITE ? { site: process.env.KVKIT_DOCS_SITE } : {}),
  trailingSlash: 'always',
  build: { format: 'directory' },
  integrations: [
    starlight({
      title: 'kvkit',
      description: 'Every kvkit error code explained, a lookup for pasted error messages, the ops and their benchmarks.',
      customCss: ['./src/styles/site.css'],
      sidebar: sidebar(catalog, allOps),
      lastUpdated: false,
      pagination: false,
    }),
  ],
});
