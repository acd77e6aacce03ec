/**
 * Node without the optional `webgpu` peer (Dawn): createWebGpuBackend is
 * KV050 saying which package to install, at the version package.json names.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it, vi } from 'vitest';
import { createWebGpuBackend, probeWebGpu } from '../src/index.js';
import { DAWN_PACKAGE } from '../src/runtime/adapter.js';

// Loading it fails (tools/pack-check installs the package without it for real).
vi.mock('webgpu', () => {
  throw new Error("Cannot find package 'webgpu'");
});

const pkg = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

describe('Node without the webgpu package', () => {
  it('createWebGpuBackend is KV050, telling to install webgpu@0.6.2; probeWebGpu says the same without throwing', async () => {
    const error = await createWebGpuBackend().then(
      () => undefined,
      (e: unknown) => e as Error & { code?: string; op?: string },
    );
    expect(error).toMatchObject({ code: 'KV050', op: 'createWebGpuBackend' });
    expect(error?.message).toMatch(/the webgpu package \(Dawn\) did not load: .+\. Install Dawn beside @kvkit\/kernels-wgsl: npm install webgpu@0\.6\.2/);
    const probe = await probeWebGpu();
    expect(probe).toMatchObject({ ok: false, fix: expect.stringContaining('npm install webgpu@0.6.2') });
  });

  it('names the version package.json asks for, as an optional peer kept as the workspace devDependency', () => {
    expect(DAWN_PACKAGE).toBe(`webgpu@${pkg.peerDependencies.webgpu}`);
    expect(pkg.peerDependenciesMeta.webgpu.optional).toBe(true);
    expect(pkg.devDependencies.webgpu).toBe(pkg.peerDependencies.webgpu);
    expect(pkg.dependencies.webgpu).toBeUndefined();
  });
});
