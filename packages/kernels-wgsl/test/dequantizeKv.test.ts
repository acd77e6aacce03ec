import type { Backend, FloatDType, PoolDType, Tensor } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu } from '../src/index.js';
import { tuning } from '../src/shaders/plan.js';

/**
 * dequantizeKv on WebGPU against the CPU reference, byte for byte: every pool
 * dtype into every rows dtype, both layouts (pages of a power of two and
 * not), head dims whose rows are units of 16, 8 and 4 bytes or (16-bit rows
 * of odd D) single elements, per-tensor and per-head scales, pools of random
 * bits (NaN, infinities and subnormals among them; every fp8 code), negative
 * slots (rows kept) and slots repeated; with a grid of few workgroups, so
 * invocations loop over many steps and the last one runs past the end; and
 * with fp8 codes decoded by arithmetic instead of the table.
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: dequantizeKv tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const TIMEOUT_MS = 300_000;

const POOLS: readonly PoolDType[] = ['f32', 'f16', 'bf16', 'fp8e4m3', 'fp8e5m2'];
const ROWS: readonly FloatDType[] = ['f32', 'f16', 'bf16'];

interface Case {
  readonly pool: PoolDType;
  readonly rows: FloatDType;
  readonly layout: 'NHD' | 'HND';
  readonly pageSize: number;
  readonly H: number;
  readonly D: number;
  readonly N: number;
  readonly perHead: boolean;
}

/** A 32-bit xorshift generator from `seed`. */
function xorshift(seed: number): () => number {
  let state = seed >>> 0 || 1;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
}

function bitsOf(dtype: PoolDType, n: number, next: () => number): Uint8Array | Uint16Array | Uint32Array {
  if (isFp8(dtype)) return Uint8Array.from({ length: n }, (_, i) => (i < 256 ? i : next() & 0xff));
  if (dtype === 'f32') {
    // Random words, with values of ordinary size most of the time.
    return Uint32Array.from({ length: n }, () => {
      const x = next();
      return x % 4 === 0 ? x : (x & 0x807fffff) | (((x >>> 8) % 40) + 100) << 23;
    });
  }
  return Uint16Array.from({ length: n }, (_, i) => (i < 65536 && n >= 65536 ? i : next() & 0xffff));
}

async function rowsOf(b: Backend, c: Case, seed: number): Promise<Uint8Array> {
  const next = xorshift(seed);
  const S = c.layout === 'HND' ? c.pageSize * Math.ceil((c.N + 5) / c.pageSize) : c.N + 5;
  const shape = c.layout === 'NHD' ? [S, c.H, c.D] : [S / c.pageSize, c.H, c.pageSize, c.D];
  const count = S * c.H * c.D;
  const pool = b.tensorFromBits(c.pool as 'f32', shape, bitsOf(c.pool, count, next) as Uint32Array);
  const slots = Int32Array.from({ length: c.N }, (_, n) => (n % 11 === 3 ? -1 - (n % 3) : n % 13 === 5 ? 0 : (next() % S)));
  const fill = c.rows === 'f32' ? Uint32Array.from({ length: c.N * c.H * c.D }, (_, i) => 0x3f800000 + i) : Uint16Array.from({ length: c.N * c.H * c.D }, (_, i) => 0x3c00 + (i & 0xff));
  const rows = b.tensorFromBits(c.rows as 'f32', [c.N, c.H, c.D], fill as Uint32Array);
  const scale = isFp8(c.pool) ? b.tensor('f32', [c.perHead ? c.H : 1], Float32Array.from({ length: c.perHead ? c.H : 1 }, (_, h) => [0.37, 1.5, 3.0e-3, 2.0 ** 20][(h + seed) % 4]!)) : undefined;
  (b.dequantizeKv as (a: unknown) => void)({ pool, slots: b.tensor('i32', [c.N], slots), rows, ...(scale ? { scale } : {}), ...(c.layout === 'HND' ? { layout: 'HND' } : {}) });
  const bits = await b.readBits(rows as Tensor<'f32'>);
  return new Uint8Array(bits.buffer, bits.byteOffset, bits.byteLength).slice();
}

/** Whether stored bits `x` of `dtype` are a NaN: where the reference gives one, any NaN will do (the host's are canonical, the device keeps payloads and signs). */
function isNaNBits(dtype: FloatDType, x: number): boolean {
  return dtype === 'f32' ? (x & 0x7fffffff) > 0x7f800000 : dtype === 'f16' ? (x & 0x7fff) > 0x7c00 : (x & 0x7fff) > 0x7f80;
}

function firstDifference(dtype: FloatDType, a: Uint8Array, e: Uint8Array): string | undefined {
  if (a.length !== e.length) return `${a.length} bytes, expected ${e.length}`;
  const view = (x: Uint8Array) => (dtype === 'f32' ? new Uint32Array(x.buffer, x.byteOffset, x.length / 4) : new Uint16Array(x.buffer, x.byteOffset, x.length / 2));
  const [got, want] = [view(a), view(e)];
  const at = got.findIndex((x, i) => x !== want[i] && !(isNaNBits(dtype, x) && isNaNBits(dtype, want[i]!)));
  return at < 0 ? undefined : `element ${at}: 0x${got[at]!.toString(16)}, expected 0x${want[at]!.toString(16)}`;
}

withDevice(`dequantizeKv against the CPU reference${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  let gpu: Backend;
  let cpu: Backend;
  const saved = { ...tuning };
  beforeAll(async () => {
    gpu = await createWebGpuBackend();
    cpu = createCpuBackend();
  });
  afterAll(() => {
    Object.assign(tuning, saved);
    gpu?.dispose();
    cpu?.dispose();
  });

  const check = async (cases: readonly Case[]) => {
    const bad: string[] = [];
    for (const [i, c] of cases.entries()) {
      const [got, want] = [await rowsOf(gpu, c, 17 + i), await rowsOf(cpu, c, 17 + i)];
      const diff = firstDifference(c.rows, got, want);
      if (diff) bad.push(`${JSON.stringify(c)}: ${diff}`);
    }
    expect(bad.slice(0, 8)).toEqual([]);
  };

  const matrix = (D: readonly number[], extra: Partial<Case> = {}): Case[] =>
    POOLS.flatMap((pool) =>
      ROWS.flatMap((rows) =>
        D.flatMap((d, i) => [
          { pool, rows, layout: 'NHD' as const, pageSize: 1, H: 3, D: d, N: 37, perHead: i % 2 === 0, ...extra },
          { pool, rows, layout: 'HND' as const, pageSize: i % 2 === 0 ? 4 : 3, H: 2, D: d, N: 29, perHead: i % 2 === 1, ...extra },
        ]),
      ),
    );

  it('every pool dtype into every rows dtype, units of 16, 8 and 4 bytes and single elements, both layouts', { timeout: TIMEOUT_MS }, async () => {
    await check(matrix([1, 2, 3, 4, 6, 8, 12, 16, 40]));
  });

  it('a grid of two workgroups: every invocation loops, the last step past the end; one unit a step and five', { timeout: TIMEOUT_MS }, async () => {
    tuning.poolReadWorkgroups = 2;
    try {
      for (const units of [1, 5]) {
        tuning.poolReadUnits = units;
        await check([
          ...POOLS.map((pool, i) => ({ pool, rows: ROWS[i % 3]!, layout: 'NHD' as const, pageSize: 1, H: 3, D: 24, N: 301, perHead: i % 2 === 0 })),
          ...POOLS.map((pool, i) => ({ pool, rows: ROWS[(i + 1) % 3]!, layout: 'HND' as const, pageSize: i % 2 ? 8 : 5, H: 5, D: 8, N: 263, perHead: i % 2 === 1 })),
        ]);
      }
    } finally {
      tuning.poolReadWorkgroups = saved.poolReadWorkgroups;
      tuning.poolReadUnits = saved.poolReadUnits;
    }
  });

  it('fp8 decoded by arithmetic (poolReadFp8: bits), and from heads too many for the table', { timeout: TIMEOUT_MS }, async () => {
    tuning.poolReadFp8 = 'bits';
    try {
      await check(matrix([4, 8, 12, 128]).filter((c) => isFp8(c.pool)));
    } finally {
      tuning.poolReadFp8 = saved.poolReadFp8;
    }
    await check((['fp8e4m3', 'fp8e5m2'] as const).map((pool, i) => ({ pool, rows: ROWS[i]!, layout: 'NHD' as const, pageSize: 1, H: 20, D: 16, N: 9, perHead: true })));
  });

  it('16-bit pools of every code into rows of their dtype (the bits kept, NaNs quieted)', { timeout: TIMEOUT_MS }, async () => {
    await check((['f16', 'bf16'] as const).flatMap((pool) => [{ pool, rows: pool, layout: 'NHD' as const, pageSize: 1, H: 2, D: 64, N: 520, perHead: false }]));
  });
});
