import { decodeFp8s, decodeHalves, STORED_BYTES } from '@kvkit/contracts/backend';
import type { ReadForm } from '@kvkit/contracts/backend';
import type { DType } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { readToHost } from '../src/runtime/hostReads.js';
import type { ReadDevice, ReadSizes } from '../src/runtime/hostReads.js';
import type { PinnedBlock } from '../src/runtime/memory.js';

/**
 * readToHost against a device made of host memory: its stream runs the
 * enqueued calls in order on a later tick, so work the test enqueues after a
 * read has started runs after the read's own copies and before the copies
 * the read enqueues once it has awaited.
 */
class HostDevice implements ReadDevice {
  readonly memory = new ArrayBuffer(1 << 24);
  #next = 4096;
  #stream: (() => void)[] = [];
  #running = false;
  readonly registered = new Set<ArrayBuffer>();
  readonly pinnedOut = new Set<PinnedBlock>();
  #pinnedFree: PinnedBlock[] = [];
  #nextPinned = 1n;
  readonly #pinnedAt = new Map<bigint, PinnedBlock>();
  live = 0;
  largestScratch = 0;
  largestPinned = 0;
  largestDownload = 0;
  snapshots = 0;
  downloads = 0;
  refusesToLock = false;
  failDownload: number | undefined;

  /** An allocation holding `bytes` at a fresh address. */
  put(bytes: Uint8Array): number {
    const ptr = this.alloc(bytes.byteLength).ptr;
    new Uint8Array(this.memory, ptr, bytes.byteLength).set(bytes);
    return ptr;
  }

  /** Later work on the stream: fills `bytes` at `ptr` with `value`. */
  overwrite(ptr: number, bytes: number, value: number): void {
    this.#enqueue(() => new Uint8Array(this.memory, ptr, bytes).fill(value));
  }

  alloc(bytes: number) {
    const ptr = this.#next;
    this.#next += Math.ceil(bytes / 256) * 256 + 256;
    if (this.#next > this.memory.byteLength) throw new Error('fake device: out of memory');
    this.live += 1;
    let released = false;
    return {
      ptr,
      bytes,
      release: () => {
        if (released) throw new Error('released twice');
        released = true;
        this.live -= 1;
      },
    };
  }

  /** An allocation the read makes for itself, counted apart from the test's own. */
  scratch(bytes: number) {
    this.largestScratch = Math.max(this.largestScratch, bytes);
    return this.alloc(bytes);
  }

  copy(dst: number, src: number, bytes: number): void {
    this.snapshots += 1;
    this.#enqueue(() => new Uint8Array(this.memory, dst, bytes).set(new Uint8Array(this.memory, src, bytes)));
  }

  download(dst: bigint | Uint8Array, src: number, bytes: number): void {
    if (this.failDownload !== undefined && this.downloads === this.failDownload) throw new Error('fake device: download failed');
    this.downloads += 1;
    this.largestDownload = Math.max(this.largestDownload, bytes);
    let target: Uint8Array;
    if (typeof dst === 'bigint') {
      const block = this.#pinnedAt.get(dst);
      if (!block || !this.pinnedOut.has(block)) throw new Error('download into a pinned block not handed out');
      target = new Uint8Array(block.view, 0, bytes);
    } else {
      if (!this.registered.has(dst.buffer as ArrayBuffer)) throw new Error('download straight into memory that is not page-locked');
      if (dst.byteLength !== bytes) throw new Error('download of another size than its target');
      target = dst;
    }
    this.#enqueue(() => target.set(new Uint8Array(this.memory, src, bytes)));
  }

  widen(dtype: 'f16' | 'bf16', src: number, dst: number, count: number): void {
    this.#enqueue(() => decodeHalves(dtype, new Uint16Array(this.memory, src, count), new Float32Array(this.memory, dst, count)));
  }

  register(target: ArrayBuffer): boolean {
    if (this.refusesToLock) return false;
    this.registered.add(target);
    return true;
  }

  unregister(target: ArrayBuffer): void {
    if (!this.registered.delete(target)) throw new Error('unregister of memory not registered');
  }

  pinned(bytes: number): PinnedBlock {
    this.largestPinned = Math.max(this.largestPinned, bytes);
    const reused = this.#pinnedFree.findIndex((b) => b.size >= bytes);
    const block = reused >= 0 ? this.#pinnedFree.splice(reused, 1)[0]! : { ptr: this.#nextPinned++, size: bytes, view: new ArrayBuffer(bytes) };
    this.#pinnedAt.set(block.ptr, block);
    this.pinnedOut.add(block);
    return block;
  }

  givePinned(block: PinnedBlock): void {
    if (!this.pinnedOut.delete(block)) throw new Error('a pinned block given back twice');
    this.#pinnedFree.push(block);
  }

  landed(): Promise<void> {
    return new Promise((resolve) => this.#enqueue(resolve));
  }

  #enqueue(work: () => void): void {
    this.#stream.push(work);
    if (this.#running) return;
    this.#running = true;
    setImmediate(() => {
      this.#running = false;
      for (const w of this.#stream.splice(0)) w();
    });
  }
}

/** The device as readToHost sees it, its own allocations counted as scratch. */
const readDevice = (d: HostDevice): ReadDevice => ({
  alloc: (bytes) => d.scratch(bytes),
  copy: (...a) => d.copy(...a),
  download: (...a) => d.download(...a),
  widen: (...a) => d.widen(...a),
  register: (t) => d.register(t),
  unregister: (t) => d.unregister(t),
  pinned: (b) => d.pinned(b),
  givePinned: (b) => d.givePinned(b),
  landed: () => d.landed(),
});

/** Stored bits of every pattern, from a 32-bit LCG. */
function randomBits(bytes: number, seed: number): Uint8Array {
  const out = new Uint8Array(bytes);
  let s = seed >>> 0;
  for (let i = 0; i < bytes; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s >>> 24;
  }
  return out;
}

/** What read (values) or readBits (bits) must give for these stored bits, as bytes. */
function expected(dtype: DType, form: ReadForm, bits: Uint8Array, count: number): Uint8Array {
  if (form === 'bits' || STORED_BYTES[dtype] === 4 || dtype === 'i64') return bits;
  const values = dtype === 'f16' || dtype === 'bf16' ? decodeHalves(dtype, new Uint16Array(bits.buffer, 0, count)) : decodeFp8s(dtype as 'fp8e4m3' | 'fp8e5m2', bits);
  return new Uint8Array(values.buffer);
}

/** The first byte at which two results differ, or -1 (element-wise deep equality is slow on arrays this long). */
function firstDifference(a: ArrayBuffer, b: Uint8Array): number {
  const x = new Uint8Array(a);
  if (x.length !== b.length) return Math.min(x.length, b.length);
  return Buffer.compare(x, b) === 0 ? -1 : x.findIndex((v, i) => v !== b[i]);
}

const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'i64', 'fp8e4m3', 'fp8e5m2'];
/** 4 KiB chunks, and reads of any size locked and landed straight into the result. */
const SMALL: ReadSizes = { chunkBytes: 4096, directMin: 1 };

describe('readToHost: reads in chunks straight into the result', () => {
  // 70,001 halves take the device widening; 3,001 do not (host decode); both end off a chunk boundary.
  for (const count of [3001, 70_001]) {
    for (const dtype of DTYPES) {
      for (const form of ['values', 'bits'] as const) {
        for (const locked of [true, false]) {
          it(`${count} ${dtype} elements as ${form}, ${locked ? 'downloaded into the locked result' : 'through pinned blocks'}: every byte as stored or decoded`, async () => {
            const d = new HostDevice();
            d.refusesToLock = !locked;
            const bits = randomBits(count * STORED_BYTES[dtype], count + dtype.length);
            const src = d.put(bits);
            const base = d.live;
            const out = await readToHost(readDevice(d), src, dtype, count, form, SMALL);
            expect(firstDifference(out, expected(dtype, form, bits, count))).toBe(-1);
            // Nothing of the whole size but the result (and, through pinned blocks, the device snapshot).
            expect(d.largestDownload).toBeLessThanOrEqual(SMALL.chunkBytes);
            expect(d.largestPinned).toBeLessThanOrEqual(SMALL.chunkBytes);
            if (locked) {
              expect(d.largestPinned).toBe(0);
              expect(d.largestScratch).toBeLessThanOrEqual(SMALL.chunkBytes);
              expect(d.snapshots).toBe(0);
            } else expect(d.snapshots).toBe(d.downloads > 1 ? 1 : 0);
            expect([d.live, d.registered.size, d.pinnedOut.size]).toEqual([base, 0, 0]);
          });
        }
      }
    }
  }

  for (const locked of [true, false]) {
    it(`sees the tensor as the work enqueued before it left it, not what is enqueued while it lands (${locked ? 'locked result' : 'pinned blocks'})`, async () => {
      const d = new HostDevice();
      d.refusesToLock = !locked;
      const count = 50_000;
      const bits = randomBits(count * 4, 7);
      const src = d.put(bits);
      const reading = readToHost(readDevice(d), src, 'f32', count, 'bits', SMALL);
      d.overwrite(src, count * 4, 0xff);
      expect(firstDifference(await reading, bits)).toBe(-1);
      expect(firstDifference(await readToHost(readDevice(d), src, 'f32', count, 'bits', SMALL), new Uint8Array(count * 4).fill(0xff))).toBe(-1);
    });
  }

  it('a single chunk through a pinned block takes no snapshot; an empty read touches nothing', async () => {
    const d = new HostDevice();
    const bits = randomBits(400, 3);
    const src = d.put(bits);
    const out = await readToHost(readDevice(d), src, 'bf16', 200, 'values', { chunkBytes: 4096, directMin: 1 << 22 });
    expect(firstDifference(out, expected('bf16', 'values', bits, 200))).toBe(-1);
    expect([d.snapshots, d.downloads, d.registered.size]).toEqual([0, 1, 0]);
    expect((await readToHost(readDevice(d), src, 'bf16', 0, 'values')).byteLength).toBe(0);
    expect(d.downloads).toBe(1);
  });

  for (const locked of [true, false]) {
    it(`a failing copy rejects the read and leaves nothing locked, allocated or handed out (${locked ? 'locked result' : 'pinned blocks'})`, async () => {
      const d = new HostDevice();
      d.refusesToLock = !locked;
      const src = d.put(randomBits(70_001 * 2, 5));
      const base = d.live;
      d.failDownload = 3;
      await expect(readToHost(readDevice(d), src, 'bf16', 70_001, 'values', SMALL)).rejects.toThrow('download failed');
      expect([d.live, d.registered.size, d.pinnedOut.size]).toEqual([base, 0, 0]);
    });
  }
});
