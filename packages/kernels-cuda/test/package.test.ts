import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { nvcc, packageRoot } from './helpers.js';

describe('the published package', () => {
  const manifest = JSON.parse(readFileSync(join(packageRoot, 'package.json'), 'utf8'));

  it('exports the backend and the profiling hooks', () => {
    expect(manifest.exports['.'].import).toBe('./dist/index.js');
    expect(manifest.exports['./profiling'].import).toBe('./dist/profiling.js');
  });

  it.skipIf(!nvcc)(`ships the fatbin and not the build log${nvcc ? '' : ' (skipped: nvcc not found, so no fatbin was built)'}`, () => {
    const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: packageRoot, encoding: 'utf8' });
    const files = (JSON.parse(out) as { files: { path: string; size: number }[] }[])[0]!.files;
    const fatbin = files.find((f) => f.path === 'dist/kvkit.fatbin');
    expect(fatbin, 'dist/kvkit.fatbin in the tarball').toBeDefined();
    expect(fatbin!.size).toBeGreaterThan(100_000);
    expect(files.map((f) => f.path)).toEqual(expect.arrayContaining(['dist/index.js', 'dist/profiling.js', 'README.md']));
    expect(files.some((f) => f.path.endsWith('.log'))).toBe(false);
  }, 60_000);
});
