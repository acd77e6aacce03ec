import { describe, expect, it } from 'vitest';
import { probeCuda } from '../src/index.js';

const here = probeCuda();
if (!here.ok) console.log(`kernels-cuda: device tests skipped on this machine: ${here.reason}`);

describe('probeCuda', () => {
  it('says the driver is missing when the library cannot be loaded', () => {
    const r = probeCuda('libcuda-that-does-not-exist.so.1');
    expect(r).toEqual({ ok: false, reason: expect.stringContaining('libcuda-that-does-not-exist.so.1 could not be loaded') });
  });

  it('reports, not throws, when a library is not the CUDA driver', () => {
    const r = probeCuda('libm.so.6');
    expect(r.ok).toBe(false);
    if (!r.ok) expect(r.reason).toContain('cuInit');
  });

  it.runIf(here.ok)('lists each device with its name, compute capability and memory', () => {
    if (!here.ok) return;
    expect(here.devices.length).toBeGreaterThan(0);
    for (const d of here.devices) {
      expect(d.name).not.toBe('');
      expect(d.computeCapability).toMatch(/^\d+\.\d$/);
      expect(d.totalMemoryBytes).toBeGreaterThan(2 ** 30);
    }
  });
});
