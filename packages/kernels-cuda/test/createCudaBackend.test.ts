import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isContractError } from '@kvkit/contracts';
import { afterEach, describe, expect, it } from 'vitest';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend, cudaBackendInfo, streamOf, wrapDeviceMemory } from '../src/index.js';
import { measureCopyAt, measureCopyCeilings } from '../src/profiling.js';
import { loadFatbin } from '../src/runtime/fatbin.js';
import { fatbinPath, gpu, nvcc } from './helpers.js';

async function rejection(p: Promise<unknown>): Promise<Error & { code?: string; op?: string; details?: Record<string, unknown> }> {
  try {
    await p;
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected a rejection');
}

describe('createCudaBackend without CUDA', () => {
  it('rejects with KV052 naming the missing driver library', async () => {
    const e = await rejection(createCudaBackend({ driverLibrary: 'libcuda-that-does-not-exist.so.1' }));
    expect(isContractError(e)).toBe(true);
    expect(e.code).toBe('KV052');
    expect(e.op).toBe('createCudaBackend');
    expect(e.message).toMatch(/^\[KV052\] createCudaBackend: CUDA is not available: no NVIDIA driver: libcuda-that-does-not-exist\.so\.1 could not be loaded\. .*Run npx kvkit explain KV052$/);
    expect(String(e.details?.fix)).toContain('createCpuBackend');
  });

  it('rejects with KV052 when the library is not the CUDA driver', async () => {
    const e = await rejection(createCudaBackend({ driverLibrary: 'libm.so.6' }));
    expect(e.code).toBe('KV052');
    expect(e.message).toContain('libm.so.6 is not a usable CUDA driver');
  });

  it.skipIf(gpu.ok)(`rejects with KV052 on this machine${gpu.ok ? ' (skipped: a GPU is here)' : ''}`, async () => {
    const e = await rejection(createCudaBackend());
    expect(e.code).toBe('KV052');
  });
});

describe('the engine-facing calls on a backend that is not CUDA', () => {
  it('wrapDeviceMemory, streamOf and cudaBackendInfo refuse it with KV044 naming the backend', () => {
    const cpu = createCpuBackend();
    for (const [op, call] of [
      ['wrapDeviceMemory', () => wrapDeviceMemory(cpu, 0x7f0000000000n, 'f32', [4])],
      ['streamOf', () => streamOf(cpu)],
      ['cudaBackendInfo', () => cudaBackendInfo(cpu)],
    ] as const) {
      let e: (Error & { code?: string; op?: string; details?: Record<string, unknown> }) | undefined;
      try {
        call();
      } catch (thrown) {
        e = thrown as Error;
      }
      expect(isContractError(e)).toBe(true);
      expect(e?.code).toBe('KV044');
      expect(e?.op).toBe(op);
      expect(e?.details?.arg).toBe('backend');
      expect(e?.message).toContain('a backend made by createCudaBackend()');
      if (op !== 'wrapDeviceMemory') expect(e?.message).toContain(`got ${cpu.label}`);
    }
    cpu.dispose();
  });

  it('the profiling hooks refuse it with KV044 before measuring anything', async () => {
    const cpu = createCpuBackend();
    await expect(measureCopyAt(cpu, { copy: 'cuMemcpyDtoDAsync', bytes: 1 << 20 })).rejects.toMatchObject({ code: 'KV044', op: 'measureCopyAt', details: { arg: 'backend' } });
    await expect(measureCopyCeilings(cpu, 1 << 20)).rejects.toMatchObject({ code: 'KV044', op: 'measureCopyCeilings' });
    cpu.dispose();
  });
});

describe('finding the fatbin', () => {
  const saved = process.env.KVKIT_CUDA_FATBIN;
  afterEach(() => {
    if (saved === undefined) delete process.env.KVKIT_CUDA_FATBIN;
    else process.env.KVKIT_CUDA_FATBIN = saved;
  });

  it('says where it looked when there is none', async () => {
    const missing = join(tmpdir(), 'no-such-dir', 'kvkit.fatbin');
    expect(await loadFatbin(missing)).toEqual({ looked: [missing] });
  });

  it('takes options.fatbinPath first, then KVKIT_CUDA_FATBIN', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvkit-fatbin-'));
    const a = join(dir, 'a.fatbin');
    const b = join(dir, 'b.fatbin');
    writeFileSync(a, 'A');
    writeFileSync(b, 'B');
    process.env.KVKIT_CUDA_FATBIN = b;
    expect(await loadFatbin(a)).toMatchObject({ path: a });
    expect(await loadFatbin(undefined)).toMatchObject({ path: b });
  });

  it.skipIf(!nvcc)(`finds the built one beside dist/ by default${nvcc ? '' : ' (skipped: nvcc not found, nothing built)'}`, async () => {
    delete process.env.KVKIT_CUDA_FATBIN;
    const found = await loadFatbin(undefined);
    expect(found).toMatchObject({ path: fatbinPath });
  });

  it.skipIf(!gpu.ok)(`rejects with KV052 when the package was built without kernels${gpu.ok ? '' : ' (skipped: no GPU here)'}`, async () => {
    const e = await rejection(createCudaBackend({ fatbinPath: join(tmpdir(), 'no-such-dir', 'kvkit.fatbin') }));
    expect(e.code).toBe('KV052');
    expect(e.message).toContain('built without kernels');
  });
});
