#!/usr/bin/env node
// Bundles device/conformance.ts and device/bench.ts for a bare GPU host (Node
// from .device, no node_modules): vitest is swapped for node:test, koffi stays
// external (found in .device/node_modules), the fatbin is copied beside them.
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = fileURLToPath(new URL('..', import.meta.url));
const root = join(pkg, '..', '..');
const out = join(root, '.device', 'bundle');
const esbuild = join(root, 'node_modules', '.pnpm', 'esbuild@0.27.7', 'node_modules', 'esbuild', 'bin', 'esbuild');
const shim = join(root, 'tools', 'device', 'src', 'vitest-on-node-test.ts');
mkdirSync(out, { recursive: true });
for (const name of ['conformance', 'bench']) {
  const r = spawnSync(
    esbuild,
    [
      join(pkg, 'device', `${name}.ts`),
      '--bundle',
      '--platform=node',
      '--format=esm',
      '--target=node20',
      '--external:koffi',
      '--external:webgpu',
      `--alias:vitest=${shim}`,
      "--banner:js=import { createRequire as __kvkitRequire } from 'node:module'; const require = __kvkitRequire(import.meta.url);",
      `--outfile=${join(out, `cuda-${name}.mjs`)}`,
      '--log-level=warning',
    ],
    { stdio: 'inherit' },
  );
  if (r.status !== 0) process.exit(r.status ?? 1);
}
const fatbin = join(pkg, 'dist', 'kvkit.fatbin');
if (!existsSync(fatbin)) throw new Error(`${fatbin} missing: build the package first`);
copyFileSync(fatbin, join(out, 'kvkit.fatbin'));
console.log(`bundled cuda-conformance.mjs and cuda-bench.mjs into ${out}, with kvkit.fatbin`);
