/**
 * The README's Node recipe, examples/node-dawn.ts, as a user meets it: it
 * type-checks under examples/tsconfig.json with skipLibCheck off (the DOM
 * lib in its place conflicts with @webgpu/types, which is why the recipe
 * leaves it out), and run in a process of its own (tsx) on an application's
 * Dawn device it writes the application's K/V cache and returns qRot and
 * kRot as the CPU reference computes them from the inputs it printed.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { findAdapter, SWIFTSHADER_ICD } from '../src/runtime/adapter.js';

const found = await findAdapter({}, []);
/** A whole program with @types/node and skipLibCheck off: half a minute when every package's tests share two cores. */
const COMPILE_TIMEOUT_MS = 120_000;
const packageRoot = fileURLToPath(new URL('..', import.meta.url));
const config = fileURLToPath(new URL('../examples/tsconfig.json', import.meta.url));

/** The example's program under its tsconfig (with `overrides`), or only `roots` under the same options. */
function diagnostics(overrides: ts.CompilerOptions = {}, roots?: string[]) {
  const parsed = ts.getParsedCommandLineOfConfigFile(config, overrides, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: () => {} })!;
  const program = ts.createProgram({ rootNames: roots ?? parsed.fileNames, options: parsed.options });
  return { options: parsed.options, found: ts.getPreEmitDiagnostics(program).map((d) => ({ code: d.code, text: ts.flattenDiagnosticMessageText(d.messageText, '\n') })) };
}

describe('the Node recipe with an application-owned Dawn device', () => {
  it('type-checks with skipLibCheck off and no DOM lib', () => {
    const { options, found } = diagnostics();
    expect(options.skipLibCheck).toBe(false);
    expect(options.lib?.some((lib) => /dom/i.test(lib))).toBe(false);
    expect(found).toEqual([]);
  }, COMPILE_TIMEOUT_MS);

  it('does not with the DOM lib, whose WebGPU declarations conflict with @webgpu/types', () => {
    // The `webgpu` package's own types are enough to meet the conflict.
    const { found } = diagnostics({ lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'] }, [createRequire(import.meta.url).resolve('webgpu/types.d.ts')]);
    expect(found.map((d) => d.code)).toContain(6200);
  }, COMPILE_TIMEOUT_MS);

  it.skipIf(!found.ok)(`runs on its own device and writes its cache as the CPU reference does${found.ok ? '' : ' (skipped: no WebGPU adapter)'}`, async () => {
    const env = { ...process.env };
    if (!env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) Object.assign(env, { VK_ICD_FILENAMES: SWIFTSHADER_ICD, XDG_RUNTIME_DIR: env.XDG_RUNTIME_DIR ?? '/tmp' });
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'examples/node-dawn.ts'], { cwd: packageRoot, env, timeout: 90_000 });
    const out = JSON.parse(stdout.trim().split('\n').at(-1)!);
    const { N, Hq, H, D, S } = out.dims as Record<string, number>;
    const cpu = createCpuBackend();
    const kPool = cpu.tensor('f32', [S, H, D], new Float32Array(S * H * D));
    const vPool = cpu.tensor('f32', [S, H, D], new Float32Array(S * H * D));
    const { qRot, kRot } = cpu.ropePoolFused({
      q: cpu.tensor('f32', [N, Hq, D], out.inputs.q),
      k: cpu.tensor('f32', [N, H, D], out.inputs.k),
      v: cpu.tensor('f32', [N, H, D], out.inputs.v),
      positions: cpu.tensor('i32', [N], out.inputs.positions),
      slots: cpu.tensor('i32', [N], out.inputs.slots),
      kPool,
      vPool,
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      ropeBase: 10000,
    });
    const close = (got: number[], want: Float32Array) => {
      expect(got.length).toBe(want.length);
      for (let i = 0; i < want.length; i++) expect(Math.abs(got[i]! - want[i]!), `element ${i}: ${got[i]} against ${want[i]}`).toBeLessThanOrEqual(1e-5);
    };
    close(out.qRot, await cpu.read(qRot));
    close(out.kRot, await cpu.read(kRot));
    close(out.kCache, await cpu.read(kPool));
    expect(out.vCache).toEqual([...(await cpu.read(vPool))]); // V is copied, not rotated: exact
    // The slots no token names keep the zeros the application wrote.
    const untouched = [...Array(S).keys()].filter((s) => !out.inputs.slots.includes(s));
    expect(untouched.length).toBeGreaterThan(0);
    for (const s of untouched) expect(out.kCache.slice(s * H * D, (s + 1) * H * D).every((x: number) => x === 0)).toBe(true);
  }, 120_000);
});
