/**
 * `read()` and `readBits()` from device memory into the array they resolve
 * with, in chunks of at most READ_CHUNK_BYTES: no host or device buffer of the
 * whole size is made beside the result (a Uint8Array past 2^32 bytes cannot
 * exist on Node 20, and a pool may be most of the device). Every copy out of
 * the tensor is enqueued before `readToHost` returns, so the read sees exactly
 * the work enqueued before it, whatever is enqueued while it lands.
 */
import { landChunk, READ_CHUNK_BYTES, readChunks, resultBytes, STORED_BYTES } from '@kvkit/contracts/backend';
import type { ReadChunk, ReadForm } from '@kvkit/contracts/backend';
import type { DType } from '@kvkit/contracts';
import { convertsOnDevice, isHalf } from './halfTransfers.js';
import type { HalfDType } from './halfTransfers.js';
import type { PinnedBlock } from './memory.js';

/** The stream-ordered calls a read makes: CudaKernels binds them to its context and stream. */
export interface ReadDevice {
  alloc(bytes: number): { readonly ptr: number; release(): void };
  copy(dst: number, src: number, bytes: number): void;
  /** Device to host: into a pinned block's address, or into host memory `register` locked. */
  download(dst: bigint | Uint8Array, src: number, bytes: number): void;
  widen(dtype: HalfDType, src: number, dst: number, count: number): void;
  /** Page-locks `target` for downloads straight into it; false where the driver refuses. */
  register(target: ArrayBuffer): boolean;
  unregister(target: ArrayBuffer): void;
  pinned(bytes: number): PinnedBlock;
  givePinned(block: PinnedBlock): void;
  /** Resolves once everything enqueued before this call has landed. */
  landed(): Promise<void>;
}

/** Reads of at least `directMin` result bytes land straight in the result, page-locked for the copy (a fresh array's first touch, not the transfer, is what costs on the host). */
export interface ReadSizes {
  readonly chunkBytes: number;
  readonly directMin: number;
}

export const READ_SIZES: ReadSizes = { chunkBytes: READ_CHUNK_BYTES, directMin: 1 << 22 };

/**
 * The `count` elements of `dtype` at device address `src`, row-major, as the
 * buffer of the result: f32 values for `read` of f16, bf16 (widened on the
 * device when large) and fp8, the stored bytes otherwise.
 */
export function readToHost(dev: ReadDevice, src: number, dtype: DType, count: number, form: ReadForm, sizes: ReadSizes = READ_SIZES): Promise<ArrayBuffer> {
  const out = new ArrayBuffer(count * resultBytes(dtype, form));
  if (count === 0) return Promise.resolve(out);
  const widen = form === 'values' && isHalf(dtype) && convertsOnDevice(count) ? dtype : undefined;
  if (out.byteLength >= sizes.directMin && dev.register(out)) return direct(dev, src, dtype, count, form, widen, out, sizes.chunkBytes);
  return staged(dev, src, dtype, count, form, widen, out, sizes.chunkBytes);
}

/** Downloads straight into the page-locked result: widened chunk by chunk through one device scratch, or fp8 codes into its tail, decoded there. */
function direct(dev: ReadDevice, src: number, dtype: DType, count: number, form: ReadForm, widen: HalfDType | undefined, out: ArrayBuffer, chunkBytes: number): Promise<ArrayBuffer> {
  const stored = STORED_BYTES[dtype];
  const wide = resultBytes(dtype, form);
  const chunks = readChunks(count, wide, chunkBytes);
  // Codes decoded on the host land in the result's last count*stored bytes: decoding upwards never overwrites a code not yet read.
  const tail = widen || wide === stored ? 0 : out.byteLength - count * stored;
  let landed: Promise<void>;
  try {
    const scratch = widen ? dev.alloc(chunks[0]!.count * 4) : undefined;
    try {
      for (const c of chunks) {
        if (scratch) {
          dev.widen(widen!, src + c.first * stored, scratch.ptr, c.count);
          dev.download(new Uint8Array(out, c.first * 4, c.count * 4), scratch.ptr, c.count * 4);
        } else dev.download(new Uint8Array(out, tail + c.first * stored, c.count * stored), src + c.first * stored, c.count * stored);
      }
    } finally {
      scratch?.release(); // stream-ordered: freed once the downloads enqueued have read it
    }
    landed = dev.landed();
  } catch (e) {
    // Downloads already enqueued may still be writing the result: it stays locked until they have landed.
    landed = settled(dev).then(() => Promise.reject(e));
  }
  return (async () => {
    try {
      await landed;
    } finally {
      dev.unregister(out);
    }
    if (tail > 0) {
      const codes = new Uint8Array(chunks[0]!.count * stored);
      for (const c of chunks) {
        codes.set(new Uint8Array(out, tail + c.first * stored, c.count * stored));
        landChunk(dtype, form, codes.buffer, 0, out, c);
      }
    }
    return out;
  })();
}

/**
 * Through two pinned blocks of a chunk each, landed and decoded one after the
 * other while the next chunk copies. Past one chunk the copies that come later
 * read a snapshot taken on the device now, as work enqueued meanwhile may write the tensor.
 */
function staged(dev: ReadDevice, src: number, dtype: DType, count: number, form: ReadForm, widen: HalfDType | undefined, out: ArrayBuffer, chunkBytes: number): Promise<ArrayBuffer> {
  const stored = STORED_BYTES[dtype];
  const moved = widen ? 4 : stored;
  const chunks = readChunks(count, Math.max(moved, resultBytes(dtype, form)), chunkBytes);
  const held: { readonly ptr: number; release(): void }[] = [];
  const blocks: PinnedBlock[] = [];
  const landing: Promise<void>[] = [];
  let from = src;
  let scratch = 0;
  const enqueue = (k: number) => {
    const c = chunks[k]!;
    let at = from + c.first * stored;
    if (widen) {
      dev.widen(widen, at, scratch, c.count);
      at = scratch;
    }
    dev.download(blocks[k % 2]!.ptr, at, c.count * moved);
    landing[k] = dev.landed();
    landing[k]!.catch(() => {}); // awaited in turn below; a fault may reject a later one first
  };
  // Only once nothing is copying into them may the blocks serve another read.
  const release = async () => {
    await Promise.allSettled(landing);
    for (const b of held) b.release();
    for (const b of blocks) dev.givePinned(b);
  };
  try {
    if (chunks.length > 1) {
      const snapshot = dev.alloc(count * stored);
      held.push(snapshot);
      dev.copy(snapshot.ptr, src, count * stored);
      from = snapshot.ptr;
    }
    if (widen) {
      const s = dev.alloc(chunks[0]!.count * 4);
      held.push(s);
      scratch = s.ptr;
    }
    for (let k = 0; k < Math.min(2, chunks.length); k++) {
      blocks.push(dev.pinned(chunks[0]!.count * moved));
      enqueue(k);
    }
  } catch (e) {
    return settled(dev).then(release).then(() => Promise.reject(e));
  }
  return (async () => {
    try {
      for (let k = 0; k < chunks.length; k++) {
        await landing[k];
        const c: ReadChunk = chunks[k]!;
        landChunk(widen ? 'f32' : dtype, form, blocks[k % 2]!.view, 0, out, c);
        if (k + 2 < chunks.length) enqueue(k + 2);
      }
      return out;
    } finally {
      await release();
    }
  })();
}

/** Once the work enqueued so far has run, or failed to. */
async function settled(dev: ReadDevice): Promise<void> {
  try {
    await dev.landed();
  } catch {
    // The error that stopped the read is the one reported.
  }
}
