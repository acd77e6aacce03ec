import { ContractError } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { cpuBackendStats, createCpuBackend } from '../src/index.js';
import { bitsOf, thrown } from './helpers.js';

describe('cpuBackendStats', () => {
  it('refuses what is not a CPU backend with KV044, naming it', () => {
    const imposter = { ...createCpuBackend(), label: 'webgpu backend #9 (elsewhere)' };
    const e = thrown(() => cpuBackendStats(imposter));
    expect(e).toMatchObject({ code: 'KV044', op: 'cpuBackendStats' });
    expect(e.message).toContain('backend must be a backend made by createCpuBackend(); got webgpu backend #9 (elsewhere)');
    expect(cpuBackendStats(createCpuBackend()).buffersAllocated).toBe(0);
  });
});

describe('createCpuBackend', () => {
  it('is a cpu backend named by an instance counter', () => {
    const a = createCpuBackend();
    const b = createCpuBackend();
    expect(a.kind).toBe('cpu');
    expect(a.label).toMatch(/^cpu backend #\d+$/);
    const n = Number(a.label.slice('cpu backend #'.length));
    expect(b.label).toBe(`cpu backend #${n + 1}`);
  });

  it('sync resolves: nothing is deferred on the CPU', async () => {
    await expect(createCpuBackend().sync()).resolves.toBeUndefined();
  });
});

describe('the largest tensor', () => {
  it('is what one typed array holds, 2^32 elements of any dtype: KV045 past it, before anything is allocated', () => {
    const backend = createCpuBackend();
    for (const dtype of ['f32', 'bf16', 'i64'] as const) {
      const e = thrown(() => backend.empty(dtype, [2 ** 16, 2 ** 16 + 1]));
      expect(e.code).toBe('KV045');
      expect(e.message).toContain(`${dtype} tensor of shape [65536, 65537] (4295032832 elements) is more than ${backend.label} holds in one: at most 4294967296 elements (each tensor is one JavaScript typed array`);
    }
  });
});

describe('tensors', () => {
  it('read returns a fresh copy of the right typed array for each dtype', async () => {
    const backend = createCpuBackend();
    const f32 = backend.tensor('f32', [2, 2], [1.5, -2, 0.1, 3]);
    const first = await backend.read(f32);
    expect(first).toBeInstanceOf(Float32Array);
    expect(Array.from(first)).toEqual([1.5, -2, Math.fround(0.1), 3]);
    first[0] = 99;
    expect((await backend.read(f32))[0]).toBe(1.5);
    expect(await backend.read(backend.tensor('f16', [2], [0.1, 2]))).toEqual(new Float32Array([0.0999755859375, 2]));
    expect(await backend.read(backend.tensor('bf16', [2], [0.1, 2]))).toEqual(new Float32Array([0.10009765625, 2]));
    expect(await backend.read(backend.tensor('i32', [3], [-(2 ** 31), 7, 2 ** 31 - 1]))).toEqual(new Int32Array([-(2 ** 31), 7, 2 ** 31 - 1]));
    expect(await backend.read(backend.tensor('i32', [2], [-3n, 7n]))).toEqual(new Int32Array([-3, 7]));
    expect(await backend.read(backend.tensor('i64', [3], [5, -(2 ** 53) + 1, 0]))).toEqual(new BigInt64Array([5n, -(2n ** 53n) + 1n, 0n]));
    expect(await backend.read(backend.tensor('i64', [2], [2n ** 63n - 1n, -(2n ** 63n)]))).toEqual(new BigInt64Array([2n ** 63n - 1n, -(2n ** 63n)]));
  });

  it('keeps f32 data given as a Float32Array bit for bit, NaN payloads and -0 included', async () => {
    const backend = createCpuBackend();
    const data = new Float32Array(new Uint32Array([0x7fa00001, 0xffc12345, 0x80000000, 0x00000001, 0x7f7fffff]).buffer);
    expect(bitsOf(await backend.read(backend.tensor('f32', [5], data)))).toEqual(bitsOf(data));
  });

  it('rounds doubles to f32 once, overflowing to infinity', async () => {
    const backend = createCpuBackend();
    const read = await backend.read(backend.tensor('f32', [3], new Float64Array([1 + 2 ** -24 + 2 ** -50, 1e39, -1e-50])));
    expect(read[0]).toBe(1 + 2 ** -23);
    expect(read[1]).toBe(Infinity);
    expect(Object.is(read[2], -0)).toBe(true);
  });

  it('empty is zeros, shapes are frozen copies', async () => {
    const backend = createCpuBackend();
    const shape = [2, 3];
    for (const dtype of ['f32', 'f16', 'bf16', 'i32'] as const) {
      const t = backend.empty(dtype, shape);
      expect(Array.from(await backend.read(t))).toEqual([0, 0, 0, 0, 0, 0]);
      expect(t.shape).toEqual([2, 3]);
      expect(Object.isFrozen(t.shape)).toBe(true);
    }
    expect(await backend.read(backend.empty('i64', [2]))).toEqual(new BigInt64Array(2));
    shape[0] = 5;
    expect(backend.empty('f32', shape).shape).toEqual([5, 3]);
  });

  it('a disposed tensor reads as disposed and is refused with KV003', async () => {
    const backend = createCpuBackend();
    const t = backend.tensor('f32', [1], [1]);
    expect(t.disposed).toBe(false);
    t.dispose();
    t.dispose();
    expect(t.disposed).toBe(true);
    await expect(backend.read(t)).rejects.toMatchObject({ code: 'KV003' });
  });

  it('after backend.dispose() every tensor it made reads as disposed', async () => {
    const backend = createCpuBackend();
    const t = backend.tensor('f32', [1], [1]);
    backend.dispose();
    expect(t.disposed).toBe(true);
    await expect(backend.read(t)).rejects.toBeInstanceOf(ContractError);
  });

  it('a tensor of another backend is refused with KV002, naming both', async () => {
    const a = createCpuBackend();
    const b = createCpuBackend();
    const err = await b.read(a.tensor('f32', [1], [1])).catch((e: ContractError) => e);
    expect(err).toBeInstanceOf(ContractError);
    expect((err as ContractError).code).toBe('KV002');
    expect((err as ContractError).message).toContain(a.label);
    expect((err as ContractError).message).toContain(b.label);
  });

  it('bad creation arguments are the contracts layer’s coded errors', () => {
    const backend = createCpuBackend();
    expect(thrown(() => backend.tensor('f32', [2], [1])).code).toBe('KV041');
    expect(thrown(() => backend.tensor('i32', [1], [1.5])).code).toBe('KV042');
    expect(thrown(() => backend.tensor('f32', [-1])).code).toBe('KV040');
  });
});
