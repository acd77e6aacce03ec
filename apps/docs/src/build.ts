import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allOps } from '@kvkit/contracts';
import { catalog } from '@kvkit/errors-catalog';
import { buildSite } from './pages.js';

const dist = join(dirname(fileURLToPath(import.meta.url)), '..', 'dist');
rmSync(dist, { recursive: true, force: true });
const pages = buildSite(catalog, allOps);
for (const [path, html] of pages) {
  mkdirSync(dirname(join(dist, path)), { recursive: true });
  writeFileSync(join(dist, path), html);
}
console.log(`docs: ${pages.size} pages in ${dist}`);
