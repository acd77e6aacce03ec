import { isFp8 } from '../tensor.js';
import type { BitsOf, DType, TensorData } from '../tensor.js';
import { decodeFp8s, encodeFp8s } from './fp8.js';
import { decodeHalves, encodeHalves } from './halfFloats.js';
import { HI, LO } from './hostEndian.js';

/** A tensor's elements on the host, laid out as every backend stores them: f32 values, f16/bf16 bits, fp8 bytes, i32, i64 (two words, low first). */
export type HostStorage = Float32Array | Uint16Array | Uint8Array | Int32Array | BigInt64Array;

/** The first `length` elements of `buffer` as `dtype`'s host storage (for a mapped or pinned buffer). */
export function storageView(dtype: DType, buffer: ArrayBuffer, length: number): HostStorage {
  switch (dtype) {
    case 'f32':
      return new Float32Array(buffer, 0, length);
    case 'f16':
    case 'bf16':
      return new Uint16Array(buffer, 0, length);
    case 'fp8e4m3':
    case 'fp8e5m2':
      return new Uint8Array(buffer, 0, length);
    case 'i32':
      return new Int32Array(buffer, 0, length);
    case 'i64':
      return new BigInt64Array(buffer, 0, length);
  }
}

/** The first `length` elements of `buffer` as `readBits` returns them: storageView's arrays, f32 as its bits. */
export function bitsView(dtype: DType, buffer: ArrayBuffer, length: number): BitsOf<DType> {
  return dtype === 'f32' ? new Uint32Array(buffer, 0, length) : (storageView(dtype, buffer, length) as BitsOf<DType>);
}

/** The exact f32 values of `length` stored f16, bf16 or fp8 elements at the start of `buffer`, as `read()` returns them. */
export function decodeNarrowFloats(dtype: 'f16' | 'bf16' | 'fp8e4m3' | 'fp8e5m2', buffer: ArrayBuffer, length: number): Float32Array {
  return isFp8(dtype) ? decodeFp8s(dtype, new Uint8Array(buffer, 0, length)) : decodeHalves(dtype, new Uint16Array(buffer, 0, length));
}

const TWO_32 = 2 ** 32;

/**
 * Writes the data given to `tensor(dtype, shape, data)` into `into`, whose
 * kind matches `dtype` (see HostStorage). The data was validated by the
 * contracts (length, representability): floats are rounded once from the
 * given value (a Float32Array into f32 is copied bit for bit, NaN payloads
 * included), integers are stored exactly.
 */
export function encodeTensorData(dtype: DType, data: TensorData, into: HostStorage): void {
  switch (dtype) {
    case 'f32':
      // One RNE rounding per element from whatever numbers were given; a same-type set is a byte copy.
      (into as Float32Array).set(data as ArrayLike<number>);
      return;
    case 'f16':
    case 'bf16':
      encodeHalves(dtype, data as ArrayLike<number>, into as Uint16Array);
      return;
    case 'fp8e4m3':
    case 'fp8e5m2':
      encodeFp8s(dtype, data as ArrayLike<number>, into as Uint8Array);
      return;
    case 'i32':
      writeI32(data, into as Int32Array);
      return;
    case 'i64':
      writeI64(data, into as BigInt64Array);
      return;
  }
}

function writeI32(data: TensorData, out: Int32Array): void {
  if (ArrayBuffer.isView(data) && !(data instanceof BigInt64Array)) {
    out.set(data as ArrayLike<number>);
    return;
  }
  // A list may hold bigints, which a typed-array set refuses.
  for (let i = 0; i < data.length; i++) out[i] = Number(data[i]);
}

function writeI64(data: TensorData, out: BigInt64Array): void {
  if (data instanceof BigInt64Array) {
    out.set(data);
    return;
  }
  // Safe integers go in as two 32-bit words, so no BigInt is made per element.
  const words = new Int32Array(out.buffer, out.byteOffset, 2 * data.length);
  for (let i = 0; i < data.length; i++) {
    const v = data[i]!;
    if (typeof v === 'bigint') out[i] = v;
    else {
      const hi = Math.floor(v / TWO_32);
      words[2 * i + HI] = hi;
      words[2 * i + LO] = v - hi * TWO_32; // in [0, 2^32): the store keeps its low 32 bits
    }
  }
}
