import { docsLoader } from '@astrojs/starlight/loaders';
import { docsSchema } from '@astrojs/starlight/schema';
import { glob } from 'astro/loaders';
import { defineCollection, z } from 'astro:content';
import { catalogLoader } from './site/catalog-loader';

export const collections = {
  docs: defineCollection({ loader: docsLoader(), schema: docsSchema() }),
  /** Generated: one item per error code, from @kvkit/errors-catalog. */
  errors: defineCollection({ loader: catalogLoader() }),
  /** Hand-written: what each op computes (one file per op, `op` naming the declaration it explains). */
  ops: defineCollection({
    loader: glob({ pattern: '*.md', base: './src/content/ops' }),
    schema: z.object({ op: z.string() }),
  }),
};
