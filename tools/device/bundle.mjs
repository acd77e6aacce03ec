#!/usr/bin/env node
// Bundles the device entry points into .device/bundle/ (where the packed
// runtime's webgpu and koffi resolve), with Vitest replaced by node:test, and
// copies the CUDA kernels' fatbin beside them.
import { copyFileSync, existsSync, mkdirSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const out = join(root, '.device', 'bundle');
mkdirSync(out, { recursive: true });

await build({
  entryPoints: {
    conformance: join(here, 'src', 'conformance.ts'),
    'catalog-examples': join(here, 'src', 'catalog-examples.ts'),
    bench: join(root, 'bench', 'src', 'main.ts'),
    'host-io': join(root, 'bench', 'src', 'hostIoMain.ts'),
    'external-memory': join(root, 'packages', 'kernels-cuda', 'examples', 'external-memory.mjs'),
  },
  outdir: out,
  outExtension: { '.js': '.mjs' },
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node20',
  external: ['webgpu', 'koffi'],
  alias: { vitest: join(here, 'src', 'vitest-on-node-test.ts') },
  // Bundled CommonJS dependencies (fast-check, the TypeScript compiler) may call require() and read __filename.
  banner: {
    js: [
      "import { createRequire as __kvkitRequire } from 'node:module';",
      "import { fileURLToPath as __kvkitPath } from 'node:url';",
      'const require = __kvkitRequire(import.meta.url);',
      'const __filename = __kvkitPath(import.meta.url);',
      "const __dirname = __filename.slice(0, __filename.lastIndexOf('/'));",
    ].join(' '),
  },
  logLevel: 'warning',
});

const kernels = join(root, 'packages', 'kernels-cuda', 'dist');
const fatbins = existsSync(kernels) ? readdirSync(kernels, { recursive: true }).filter((f) => String(f).endsWith('.fatbin')) : [];
for (const f of fatbins) copyFileSync(join(kernels, String(f)), join(out, String(f).split('/').pop()));
console.log(`bundled into ${out}${fatbins.length ? `, with ${fatbins.join(', ')}` : ', no CUDA fatbin found (build @kvkit/kernels-cuda first)'}`);
