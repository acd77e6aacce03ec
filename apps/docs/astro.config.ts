import starlight from '@astrojs/starlight';
import { allOps } from '@kvkit/contracts/dsl';
import { catalog } from '@kvkit/errors-catalog';
import { defineConfig } from 'astro/config';
import { publicPackages } from './src/site/packages';
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
      customCss: ['./src/styles/site.css', './src/styles/api.css'],
      sidebar: sidebar(catalog, allOps, publicPackages()),
      lastUpdated: false,
      // Long lines wrap (indent kept): a code block never scrolls sideways, which the keyboard could not reach.
      expressiveCode: { defaultProps: { wrap: true } },
      // Previous/next links at the foot of every page, in the sidebar's order.
      pagination: true,
      // The footer adds the version line (the packages' version, from their package.json) under the links.
      components: { Footer: './src/components/Footer.astro' },
    }),
  ],
});
