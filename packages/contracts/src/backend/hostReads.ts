/**
 * What a GPU backend's `read()` and `readBits()` share on the host: the array
 * they resolve with, allocated once, and the chunks its bytes land in. A
 * chunk's bits go straight into the result (decoded there for f16, bf16 and
 * fp8 values), so no byte buffer of the whole size is ever made beside it:
 * past 2^32 bytes, Node 20 could not make one.
 */
import { isFp8 } from '../tensor.js';
import type { DType } from '../tensor.js';
import { decodeFp8s } from './fp8.js';
import { decodeHalves } from './halfFloats.js';

/** `read()`: values (f16, bf16 and fp8 widened to f32, exactly); `readBits()`: the stored bits. */
export type ReadForm = 'values' | 'bits';

/** The most elements one JavaScript typed array holds (Node 20's V8): a CPU tensor, and any `read()` or `readBits()` result. */
export const TYPED_ARRAY_MAX_LENGTH = 2 ** 32;

/** Host bytes a read stages at a time: pinned blocks, device scratch and staging buffers stay this small whatever the tensor. */
export const READ_CHUNK_BYTES = 64 * 2 ** 20;

/** Bytes of one element as every backend stores it. */
export const STORED_BYTES: Readonly<Record<DType, number>> = { f32: 4, f16: 2, bf16: 2, i32: 4, i64: 8, fp8e4m3: 1, fp8e5m2: 1 };

/** Bytes of one element in the result: f32 for a narrow float's values, the stored width otherwise. */
export function resultBytes(dtype: DType, form: ReadForm): number {
  return form === 'values' && STORED_BYTES[dtype] < 4 ? 4 : STORED_BYTES[dtype];
}

/** A run of elements `[first, first + count)` read together. */
export interface ReadChunk {
  readonly first: number;
  readonly count: number;
}

/** `count` elements in runs whose bytes, at `elementBytes` each, stay within `chunkBytes` (the last run is shorter). */
export function readChunks(count: number, elementBytes: number, chunkBytes = READ_CHUNK_BYTES): ReadChunk[] {
  const per = Math.max(1, Math.floor(chunkBytes / elementBytes));
  const chunks: ReadChunk[] = [];
  for (let first = 0; first < count; first += per) chunks.push({ first, count: Math.min(per, count - first) });
  return chunks;
}

/**
 * Lands `chunk`'s stored bits, which start at byte `at` of `bits`, in `out`
 * (the result's buffer, laid out as `resultBytes` says): values of f16, bf16
 * and fp8 decoded to f32, everything else copied as it is.
 */
export function landChunk(dtype: DType, form: ReadForm, bits: ArrayBuffer, at: number, out: ArrayBuffer, chunk: ReadChunk): void {
  const { first, count } = chunk;
  if (form === 'values' && isFp8(dtype)) decodeFp8s(dtype, new Uint8Array(bits, at, count), new Float32Array(out, first * 4, count));
  else if (form === 'values' && (dtype === 'f16' || dtype === 'bf16')) decodeHalves(dtype, new Uint16Array(bits, at, count), new Float32Array(out, first * 4, count));
  else {
    const es = STORED_BYTES[dtype];
    new Uint8Array(out, first * es, count * es).set(new Uint8Array(bits, at, count * es));
  }
}
