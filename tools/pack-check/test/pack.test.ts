import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * What a user gets from npm: each package packed as it would be published,
 * installed with its own kvkit dependencies only into an empty project,
 * then imported by Node and compiled by tsc against the shipped `.d.ts`.
 */
const repo = fileURLToPath(new URL('../../../', import.meta.url));
const tsc = join(repo, 'node_modules', 'typescript', 'bin', 'tsc');
const work = mkdtempSync(join(tmpdir(), 'kvkit-pack-'));
const tarballs = new Map<string, string>();

function pack(name: string): string {
  const dir = join(repo, 'packages', name.replace('@kvkit/', ''));
  const out = join(work, 'tarballs');
  mkdirSync(out, { recursive: true });
  execFileSync('pnpm', ['pack', '--pack-destination', out], { cwd: dir, stdio: 'pipe' });
  const file = readdirSync(out).find((f) => f.startsWith(name.replace('@', '').replace('/', '-')))!;
  tarballs.set(name, join(out, file));
  return join(out, file);
}

function manifest(name: string): { dependencies?: Record<string, string>; peerDependencies?: Record<string, string> } {
  return JSON.parse(readFileSync(join(repo, 'packages', name.replace('@kvkit/', ''), 'package.json'), 'utf8'));
}

/** The @webgpu/types kernels-wgsl is developed against: the one a user might add. */
const webGpuTypesVersion = (JSON.parse(readFileSync(join(repo, 'packages', 'kernels-wgsl', 'package.json'), 'utf8')) as { devDependencies: Record<string, string> }).devDependencies['@webgpu/types'];

function kvkitDeps(name: string): string[] {
  const pkg = manifest(name);
  const deps = Object.keys(pkg.dependencies ?? {}).filter((d) => d.startsWith('@kvkit/'));
  return [...new Set([...deps, ...deps.flatMap(kvkitDeps)])];
}

/**
 * An empty npm project with `name` (and the kvkit packages it depends on)
 * installed from tarballs, with its peer dependencies from the registry
 * beside it as a Node user installs them, unless `peers` is false.
 */
function install(name: string, files: Record<string, string>, lib: string[] = ['es2023'], peers = true): string {
  const dir = join(work, `${name.replace('@kvkit/', '')}${peers ? '' : '-without-peers'}`);
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'consumer', private: true, type: 'module' }));
  const tgz = [name, ...kvkitDeps(name)].map((n) => tarballs.get(n) ?? pack(n));
  const peerSpecs = peers ? Object.entries(manifest(name).peerDependencies ?? {}).map(([p, version]) => `${p}@${version}`) : [];
  execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', ...tgz, ...peerSpecs], { cwd: dir, stdio: 'pipe' });
  for (const [f, text] of Object.entries(files)) writeFileSync(join(dir, f), text);
  writeFileSync(
    join(dir, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: [], lib }, include: ['*.ts'] }),
  );
  return dir;
}

// Without KVKIT_DOCS_BASE, so messages end as an installed package prints them by default.
const { KVKIT_DOCS_BASE: _docsBase, ...plainEnv } = process.env;
const run = (dir: string, file: string) => execFileSync(process.execPath, [file], { cwd: dir, encoding: 'utf8', env: plainEnv });
/** The kvkit packages an install brought, its own and their dependencies. */
const installed = (dir: string) => readdirSync(join(dir, 'node_modules', '@kvkit')).sort();
/** tsc's output: empty when the consumer compiles. */
const typecheck = (dir: string, project = '.') => spawnSync(process.execPath, [tsc, '-p', project], { cwd: dir, encoding: 'utf8' }).stdout;

/** ESM only, as each README says: `require()` from CommonJS is refused by the exports map, `import()` from it loads the package. */
function fromCommonJs(dir: string, name: string): { required: string; imported: boolean } {
  writeFileSync(
    join(dir, 'load.cjs'),
    `let required = 'loaded';
    try { require(${JSON.stringify(name)}); } catch (e) { required = e.code; }
    import(${JSON.stringify(name)}).then((m) => console.log(JSON.stringify({ required, imported: Object.keys(m).length > 0 })));`,
  );
  return JSON.parse(run(dir, 'load.cjs'));
}
const ESM_ONLY = { required: 'ERR_PACKAGE_PATH_NOT_EXPORTED', imported: true };

/** For a test that installs several packages from the registry and typechecks against them. */
const INSTALL_TIMEOUT_MS = 240_000;

describe('packed packages, installed alone', () => {
  it('@kvkit/kernels-cpu runs an op and its types check shapes', () => {
    const dir = install('@kvkit/kernels-cpu', {
      'use.mjs': `import { createCpuBackend } from '@kvkit/kernels-cpu';
        const b = createCpuBackend();
        const { kOut } = b.fusedNormRopeStacked({ kv: b.tensor('f32', [1, 1, 4], [1, 2, 3, 4]), kNormWeight: b.tensor('f32', [1, 2], [1, 1]),
          eps: b.tensor('f32', [1], [0]), cosSinCache: b.tensor('f32', [1, 2], [1, 0]), positions: b.tensor('i32', [1], [0]), numKvHeads: 1, headDim: 2, rotaryDim: 2 });
        console.log(JSON.stringify(Array.from(await b.read(kOut))));`,
      'error.mjs': `import { createCpuBackend } from '@kvkit/kernels-cpu';
        import { ContractError } from '@kvkit/contracts';
        const b = createCpuBackend();
        try {
          b.fusedNormRopeStacked({ kv: b.tensor('f32', [1, 1, 4]), kNormWeight: b.tensor('f32', [1, 3]), eps: b.tensor('f32', [1]),
            cosSinCache: b.tensor('f32', [1, 2]), positions: b.tensor('i32', [1], [0]), numKvHeads: 1, headDim: 2, rotaryDim: 2 });
        } catch (e) {
          console.log(JSON.stringify({ isContractError: e instanceof ContractError, message: e.message, fixes: e.fixes.length }));
        }`,
      'types.ts': `import { createCpuBackend } from '@kvkit/kernels-cpu';
        import type { Tensor } from '@kvkit/contracts';
        const b = createCpuBackend();
        const kv = b.tensor('bf16', [4, 2, 32]);
        const args = { kv, kNormWeight: b.tensor('bf16', [2, 8]), eps: b.tensor('f32', [2]), cosSinCache: b.tensor('f32', [16, 8]), positions: b.tensor('i32', [4]), numKvHeads: 2, headDim: 8, rotaryDim: 8 } as const;
        const out: { kOut: Tensor<'bf16', readonly [2, 4, 2, 8]> } = b.fusedNormRopeStacked(args);
        // @ts-expect-error KV014: kOut in [T, L, H, D] order
        b.fusedNormRopeStacked({ ...args, kOut: b.empty('bf16', [4, 2, 2, 8]) });
        export { out };`,
    });
    // k = [1, 2]: rms = sqrt(2.5), so kOut = k / sqrt(2.5) at position 0 (no rotation).
    const kOut = JSON.parse(run(dir, 'use.mjs')) as number[];
    expect(kOut.map((x) => +x.toFixed(5))).toEqual([1 / Math.sqrt(2.5), 2 / Math.sqrt(2.5)].map((x) => +x.toFixed(5)));
    // The message and fixes come from the contracts' table: the catalog is not installed with a backend.
    expect(installed(dir)).toEqual(['contracts', 'kernels-cpu']);
    const error = JSON.parse(run(dir, 'error.mjs')) as { isContractError: boolean; message: string; fixes: number };
    expect(error.isContractError).toBe(true);
    expect(error.message).toMatch(/^\[KV012\] fusedNormRopeStacked: kNormWeight has shape \[1, 3\]; expected \[L, D\] = \[1, 2\]\. .* Run npx kvkit explain KV012$/);
    expect(error.fixes).toBeGreaterThan(0);
    expect(typecheck(dir)).toBe('');
    expect(fromCommonJs(dir, '@kvkit/kernels-cpu')).toEqual(ESM_ONLY);
  });

  it('@kvkit/contracts alone gives the Backend type and its compile-time checks', () => {
    const dir = install('@kvkit/contracts', {
      'use.mjs': `import { allOps, allErrors } from '@kvkit/contracts/dsl'; console.log(allOps.length, Object.keys(allErrors).length);`,
      'error.mjs': `import { ContractError } from '@kvkit/contracts';
        console.log(new ContractError('KV003', 'read', { arg: 'tensor' }).message);`,
      'types.ts': `import type { Backend, Tensor } from '@kvkit/contracts';
        export function normRope(b: Backend, kv: Tensor<'f16', readonly [number, 3, 64]>): Tensor<'f16', readonly [3, number, 4, 8]> {
          const args = { kv, kNormWeight: b.tensor('f16', [3, 8]), eps: b.tensor('f32', [3]), cosSinCache: b.tensor('f32', [64, 8]), positions: b.tensor('i64', [0] as number[]), numKvHeads: 4, headDim: 8, rotaryDim: 8 } as const;
          // @ts-expect-error KV012: one weight row per layer is needed
          b.fusedNormRopeStacked({ ...args, kNormWeight: b.tensor('f16', [2, 8]) });
          return b.fusedNormRopeStacked(args).kOut;
        }`,
    });
    const [ops, codes] = run(dir, 'use.mjs').trim().split(' ').map(Number);
    expect(ops).toBeGreaterThanOrEqual(3);
    expect(codes).toBeGreaterThan(40);
    expect(run(dir, 'error.mjs').trim()).toMatch(/^\[KV003\] read: tensor was disposed and can no longer be used\. Run npx kvkit explain KV003$/);
    expect(typecheck(dir)).toBe('');
    expect(fromCommonJs(dir, '@kvkit/contracts')).toEqual(ESM_ONLY);
  });

  it('@kvkit/errors-catalog ships the catalog and the kvkit command, on top of @kvkit/contracts', () => {
    const dir = install('@kvkit/errors-catalog', {
      'use.mjs': `import * as catalog from '@kvkit/errors-catalog';
        import * as contracts from '@kvkit/contracts';
        const e = new catalog.ContractError('KV012', 'fusedNormRopeStacked');
        console.log(JSON.stringify({ same: catalog.ContractError === contracts.ContractError && e instanceof contracts.ContractError,
          fixesAreSolutions: JSON.stringify(e.fixes) === JSON.stringify(catalog.explain('KV012').solutions) }));`,
      'types.ts': `import { explain, lookup, ContractError, type CatalogEntry } from '@kvkit/errors-catalog';
        const e: CatalogEntry | undefined = explain('KV012');
        const first: string | undefined = lookup('positions/slots must have one entry per token')[0]?.entry.code;
        const err: ContractError = new ContractError('KV003', 'read', { arg: 'tensor' });
        export { e, first, err };`,
    });
    expect(installed(dir)).toEqual(['contracts', 'errors-catalog']);
    expect(JSON.parse(run(dir, 'use.mjs'))).toEqual({ same: true, fixesAreSolutions: true });
    const out = execFileSync(join(dir, 'node_modules', '.bin', 'kvkit'), ['explain', 'KV013'], { encoding: 'utf8' });
    expect(out).toMatch(/^KV013: /);
    expect(typecheck(dir)).toBe('');
    expect(fromCommonJs(dir, '@kvkit/errors-catalog')).toEqual(ESM_ONLY);
  });

  // Two installs from the registry (Dawn, koffi, @webgpu/types) and three tsc runs: past a minute on a slow network.
  it('@kvkit/kernels-wgsl and @kvkit/kernels-cuda import and probe without throwing', () => {
    const wgsl = install('@kvkit/kernels-wgsl', {
      'use.mjs': `import { probeWebGpu } from '@kvkit/kernels-wgsl'; const r = await probeWebGpu(); console.log(typeof r.ok);`,
      'types.ts': `import { createWebGpuBackend, gpuBufferOf, probeWebGpu, webGpuBackendStats, type AdapterProbe } from '@kvkit/kernels-wgsl';
        export const adapter: Promise<GPUAdapter | undefined> = probeWebGpu().then((r: AdapterProbe) => (r.ok ? r.adapter : undefined));
        // The engine-facing surface: the application's device in, kvkit's buffers out.
        export async function engine(device: GPUDevice): Promise<{ buffer: GPUBuffer; byteOffset: number; live: number }> {
          const backend = await createWebGpuBackend({ device });
          const mine = device.createBuffer({ size: 64, usage: 0x0080 | 0x0004 }); // STORAGE | COPY_SRC
          const t = backend.wrap(mine, 'bf16', [2, 3], { byteOffset: 2 });
          backend.flush();
          const { buffer, byteOffset } = gpuBufferOf(backend.splitQkv(backend.wrap(mine, 'f32', [1, 8]), { numQoHeads: 2, numKvHeads: 1, headDim: 2 }).k);
          t.dispose();
          return { buffer, byteOffset, live: webGpuBackendStats(backend).liveBuffers };
        }`,
    }, ['es2023', 'dom']);
    expect(run(wgsl, 'use.mjs').trim()).toBe('boolean');
    expect(installed(wgsl)).toEqual(['contracts', 'kernels-wgsl']);
    expect(readdirSync(join(wgsl, 'node_modules'))).toContain('webgpu');
    // TypeScript 6's DOM lib alone, no skipLibCheck: compiles. Adding @webgpu/types declares the same names again: fails (README).
    expect(typecheck(wgsl)).toBe('');
    execFileSync('npm', ['install', '--no-audit', '--no-fund', '--loglevel=error', `@webgpu/types@${webGpuTypesVersion}`], { cwd: wgsl, stdio: 'pipe' });
    writeFileSync(join(wgsl, 'tsconfig.webgpu-types.json'), JSON.stringify({ extends: './tsconfig.json', compilerOptions: { types: ['@webgpu/types'] } }));
    expect(typecheck(wgsl, 'tsconfig.webgpu-types.json')).toMatch(/error TS6200: Definitions of the following identifiers conflict/);
    expect(fromCommonJs(wgsl, '@kvkit/kernels-wgsl')).toEqual(ESM_ONLY);
    const cuda = install('@kvkit/kernels-cuda', {
      'use.mjs': `import { probeCuda } from '@kvkit/kernels-cuda'; console.log(typeof probeCuda().ok);`,
      'types.ts': `import { probeCuda, type CudaProbe } from '@kvkit/kernels-cuda'; export const p: CudaProbe = probeCuda();`,
    });
    expect(run(cuda, 'use.mjs').trim()).toBe('boolean');
    expect(installed(cuda)).toEqual(['contracts', 'kernels-cuda']);
    expect(typecheck(cuda)).toBe('');
    expect(fromCommonJs(cuda, '@kvkit/kernels-cuda')).toEqual(ESM_ONLY);
  }, INSTALL_TIMEOUT_MS);

  it('@kvkit/kernels-wgsl without its optional peer webgpu (a browser project): no Dawn downloaded; Node is told to install webgpu', () => {
    const dir = install(
      '@kvkit/kernels-wgsl',
      {
        'use.mjs': `import { probeWebGpu, createWebGpuBackend } from '@kvkit/kernels-wgsl';
          const probe = await probeWebGpu();
          const error = await createWebGpuBackend().then(() => undefined, (e) => e);
          console.log(JSON.stringify({ ok: probe.ok, fix: probe.fix, code: error?.code }));`,
      },
      ['es2023', 'dom'],
      false,
    );
    expect(readdirSync(join(dir, 'node_modules'))).not.toContain('webgpu');
    expect(JSON.parse(run(dir, 'use.mjs'))).toEqual({ ok: false, fix: expect.stringContaining('npm install webgpu@0.6.2'), code: 'KV050' });
  });
});
