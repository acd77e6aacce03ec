import { spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { KERNEL_NAMES } from '../src/generated/kernels.js';
import { fatbinEntries, fatbinPath, nvcc, packageRoot, parsePtxasLog, ptxasLogPath } from './helpers.js';

/** The package's build script in a scratch package whose kvkit.cu is `source`, run with `compiler` as NVCC. */
function buildScratch(source: string, compiler: string) {
  const root = mkdtempSync(join(tmpdir(), 'kvkit-build-'));
  mkdirSync(join(root, 'scripts'));
  mkdirSync(join(root, 'src', 'cuda'), { recursive: true });
  copyFileSync(join(packageRoot, 'scripts', 'build-kernels.mjs'), join(root, 'scripts', 'build-kernels.mjs'));
  writeFileSync(join(root, 'src', 'cuda', 'kvkit.cu'), source);
  const result = spawnSync(process.execPath, [join(root, 'scripts', 'build-kernels.mjs')], { encoding: 'utf8', env: { ...process.env, NVCC: compiler } });
  return { ...result, fatbin: join(root, 'dist', 'kvkit.fatbin') };
}

describe('a kernel build that fails', () => {
  it('prints the compiler log, fails the build and leaves no fatbin (a compiler that reports an error)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvkit-nvcc-'));
    const compiler = join(dir, 'nvcc');
    writeFileSync(compiler, '#!/bin/sh\necho \'kvkit.cu(7): error: identifier "lanes_per_row" is undefined\' >&2\nexit 2\n');
    chmodSync(compiler, 0o755);
    const run = buildScratch('extern "C" __global__ void k() {}\n', compiler);
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('kvkit.cu(7): error: identifier "lanes_per_row" is undefined');
    expect(run.stderr).toMatch(/nvcc failed \(exit 2\)/);
    expect(existsSync(run.fatbin)).toBe(false);
  });

  it.skipIf(!nvcc)(`prints nvcc's own error for a broken kernel and fails the build${nvcc ? '' : ' (skipped: nvcc not found)'}`, () => {
    const run = buildScratch('extern "C" __global__ void broken(float* out) {\n  out[threadIdx.x] = undeclared_scale;\n}\n', nvcc!);
    expect(run.status).toBe(1);
    expect(run.stderr).toMatch(/kvkit\.cu\(2\): error: identifier "undeclared_scale" is undefined/);
    expect(existsSync(run.fatbin)).toBe(false);
  }, 120_000);
});

describe.skipIf(!nvcc)(`the kernels built by nvcc${nvcc ? '' : ' (skipped: nvcc not found)'}`, () => {
  it('the build wrote the fatbin and the ptxas report', () => {
    expect(existsSync(fatbinPath), `${fatbinPath} missing: run the package build`).toBe(true);
    expect(existsSync(ptxasLogPath), `${ptxasLogPath} missing: run the package build`).toBe(true);
  });

  it('the fatbin holds sm_80 and sm_90 machine code and compute_90 PTX', () => {
    const entries = fatbinEntries();
    expect(entries).toEqual(expect.arrayContaining([{ kind: 'elf', sm: 80 }, { kind: 'elf', sm: 90 }, { kind: 'ptx', sm: 90 }]));
  });

  it('every kernel compiles for sm_80 and sm_90 with no register spills', () => {
    const fns = parsePtxasLog(readFileSync(ptxasLogPath, 'utf8'));
    const byTarget = (t: string) => new Set(fns.filter((f) => f.target === t).map((f) => f.name));
    const sm80 = byTarget('sm_80');
    const sm90 = byTarget('sm_90');
    expect(sm80.size).toBeGreaterThan(0);
    expect([...sm80].sort()).toEqual([...sm90].sort());
    const spilling = fns.filter((f) => f.spillStores > 0 || f.spillLoads > 0).map((f) => `${f.name} (${f.target}): ${f.spillStores} B stored, ${f.spillLoads} B loaded`);
    expect(spilling, 'functions that spill').toEqual([]);
    // Every kernel the runtime launches is in the fatbin for both targets.
    const missing = KERNEL_NAMES.filter((name) => !sm80.has(name) || !sm90.has(name));
    expect(missing, 'kernels the runtime launches but the build did not compile').toEqual([]);
  });

  it('a kernel that spills is reported as spilling (the check can fail)', () => {
    // 64 live floats per thread squeezed into 16 registers: ptxas must spill, and the parser must see it.
    const dir = mkdtempSync(join(tmpdir(), 'kvkit-spill-'));
    const source = join(dir, 'pressure.cu');
    writeFileSync(
      source,
      `extern "C" __global__ void pressure(float* out, const float* in) {
        float acc[64];
        for (int i = 0; i < 64; i++) acc[i] = in[threadIdx.x + i * 32];
        for (int r = 1; r < 9; r++)
          for (int i = 0; i < 64; i++) acc[i] = acc[i] * acc[(i + r) & 63] + 1.0f;
        float s = 0.0f;
        for (int i = 0; i < 64; i++) s += acc[i];
        out[threadIdx.x] = s;
      }`,
    );
    const result = spawnSync(nvcc!, ['-cubin', '-O3', '-Xptxas', '-v', '-maxrregcount', '16', '-arch', 'sm_90', source, '-o', join(dir, 'pressure.cubin')], { encoding: 'utf8' });
    expect(result.status, result.stderr).toBe(0);
    const parsed = parsePtxasLog(`${result.stdout}${result.stderr}`);
    expect(parsed.map((f) => f.name)).toEqual(['pressure']);
    expect(parsed[0]!.spillStores).toBeGreaterThan(0);
  }, 120_000);
});
