import type { CatalogEntry } from '@kvkit/errors-catalog';
import { catalog } from '@kvkit/errors-catalog';
import type { Loader } from 'astro/loaders';

/** A catalog entry with its prose fields rendered by the site's own Markdown pipeline. */
export interface ErrorPageData extends CatalogEntry {
  html: { meaning: string; whenItHappens: string; situations: string; solutions: string };
}

/**
 * The `errors` collection: one item per catalog code, read from
 * @kvkit/errors-catalog at every build (nothing cached across builds, so a
 * new code gets its page the next time the site is built).
 */
export function catalogLoader(): Loader {
  return {
    name: 'kvkit-errors-catalog',
    async load({ store, renderMarkdown }) {
      store.clear();
      const md = async (text: string) => (await renderMarkdown(text)).html;
      for (const entry of catalog) {
        const data: ErrorPageData = {
          ...entry,
          html: {
            meaning: await md(entry.meaning),
            whenItHappens: await md(entry.whenItHappens),
            situations: await md(entry.situations.map((s) => `- ${s}`).join('\n')),
            solutions: await md(entry.solutions.map((s, i) => `${i + 1}. ${s}`).join('\n')),
          },
        };
        // JSON round trip: the store keeps plain data only (an absent `retired` is dropped, not stored as undefined).
        store.set({ id: entry.code.toLowerCase(), data: JSON.parse(JSON.stringify(data)) });
      }
    },
  };
}
