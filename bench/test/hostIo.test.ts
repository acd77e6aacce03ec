import { createCpuBackend } from '@kvkit/kernels-cpu';
import { describe, expect, it } from 'vitest';
import { HOST_IO_DTYPES, hostData, hostIoTable, measureBackendIo, measureCodec } from '../src/hostIo.js';

describe('host I/O measurement', () => {
  it('times tensor() and read() for every dtype, in bytes of the host arrays, after a checked round trip', async () => {
    const backend = createCpuBackend();
    const rows = await measureBackendIo('cpu', backend, 1001, 3);
    expect(rows.map((r) => `${r.what} ${r.dtype}`)).toEqual(HOST_IO_DTYPES.flatMap((d) => [`tensor() ${d}`, `read() ${d}`]));
    const bytes = { f32: 4, f16: 4, bf16: 4, i32: 4, i64: 8 };
    for (const r of rows) {
      expect(r.bytes).toBe(1001 * bytes[r.dtype as keyof typeof bytes]);
      expect(r.gbs.min).toBeGreaterThan(0);
      expect(r.gbs.min).toBeLessThanOrEqual(r.gbs.median);
      expect(r.gbs.median).toBeLessThanOrEqual(r.gbs.max);
    }
    expect(hostIoTable(rows).split('\n')).toHaveLength(rows.length + 3);
    expect(rows.every((r) => r.cpuGbs > 0)).toBe(true);
  });

  it('refuses to time a backend whose round trip is wrong', async () => {
    const backend = createCpuBackend();
    const lying = new Proxy(backend, {
      get: (target, key) => (key === 'read' ? async () => new Float32Array(5) : Reflect.get(target, key)),
    });
    await expect(measureBackendIo('lying', lying, 5, 1, ['f16'])).rejects.toThrow(/did not give back the stored values/);
  });

  it('times the codec both ways for both formats, from every kind of source', async () => {
    const rows = await measureCodec(4096, 2);
    expect(rows.map((r) => `${r.what} ${r.dtype} ${r.host}`)).toEqual(
      ['f16', 'bf16'].flatMap((d) => [`encode ${d} Float32Array`, `encode ${d} Float64Array`, `encode ${d} number[] (8 B each)`, `decode ${d} Float32Array`]),
    );
  });

  it('makes random data: no zeros, every dtype', () => {
    for (const dtype of HOST_IO_DTYPES) {
      const data = hostData(dtype, 1000);
      expect(data).toHaveLength(1000);
      expect(Array.from(data as ArrayLike<number | bigint>).filter((x) => x === 0 || x === 0n).length).toBeLessThan(2);
    }
  });
});
