import { describe, expect, it } from 'vitest';
import { decodeFp8s, decodeHalves, landChunk, READ_CHUNK_BYTES, readChunks, resultBytes, STORED_BYTES } from '../src/backend/index.js';
import type { DType } from '../src/index.js';

describe('host reads', () => {
  it('splits a read into runs of whole elements, none past the chunk, covering every element once', () => {
    for (const [count, bytes, chunk] of [
      [0, 4, 4096],
      [1, 8, 4096],
      [1023, 4, 4096],
      [1024, 4, 4096],
      [1025, 4, 4096],
      [10_000, 3, 4096],
      [5, 4096, 1000],
    ] as const) {
      const runs = readChunks(count, bytes, chunk);
      let next = 0;
      for (const r of runs) {
        expect(r.first).toBe(next);
        expect(r.count).toBeGreaterThan(0);
        expect(r.count * bytes <= chunk || r.count === 1).toBe(true);
        next += r.count;
      }
      expect(next).toBe(count);
    }
    // A pool of 1.1M rows of 8 x 128 values read as f32: 4.5 GB in 68 runs of 64 MiB.
    expect(readChunks(1_100_000 * 1024, 4).length).toBe(Math.ceil((1_100_000 * 1024 * 4) / READ_CHUNK_BYTES));
  });

  it('widens f16, bf16 and fp8 values to f32 and keeps every other layout as stored', () => {
    const widths = Object.fromEntries((Object.keys(STORED_BYTES) as DType[]).map((d) => [d, [resultBytes(d, 'values'), resultBytes(d, 'bits')]]));
    expect(widths).toEqual({ f32: [4, 4], f16: [4, 2], bf16: [4, 2], i32: [4, 4], i64: [8, 8], fp8e4m3: [4, 1], fp8e5m2: [4, 1] });
  });

  it('lands a chunk at its place in the result: decoded values, or the bits as they are', () => {
    const bits = new Uint16Array([0x3f80, 0xc000, 0x7fc1, 0x0001, 0x8000, 0x4049]);
    const staging = new ArrayBuffer(64);
    new Uint16Array(staging, 8, 3).set(bits.subarray(3));
    const values = new ArrayBuffer(6 * 4);
    landChunk('bf16', 'values', staging, 8, values, { first: 3, count: 3 });
    expect([...new Uint32Array(values, 12)]).toEqual([...new Uint32Array(decodeHalves('bf16', bits.subarray(3)).buffer)]);
    expect([...new Uint32Array(values, 0, 3)]).toEqual([0, 0, 0]);
    const stored = new ArrayBuffer(6 * 2);
    landChunk('bf16', 'bits', staging, 8, stored, { first: 3, count: 3 });
    expect([...new Uint16Array(stored)]).toEqual([0, 0, 0, 0x0001, 0x8000, 0x4049]);
    const codes = new Uint8Array([0x00, 0x7e, 0x80, 0xff]);
    const fp8 = new ArrayBuffer(16);
    landChunk('fp8e4m3', 'values', codes.buffer, 1, fp8, { first: 1, count: 3 });
    expect([...new Float32Array(fp8, 4)]).toEqual([...decodeFp8s('fp8e4m3', codes.subarray(1))]);
  });
});
