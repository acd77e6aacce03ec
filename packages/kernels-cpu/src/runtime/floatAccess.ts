import type { DType, FloatDType } from '@kvkit/contracts';
import { decodeBf16, decodeF16, decodeFp8s, decodeHalves, encodeBf16, encodeF16 } from '@kvkit/contracts/backend';
import type { Storage } from './cpuTensor.js';

/** Element access to float storage in f64: reads decode exactly, writes round once to the storage dtype (RNE). */
export interface FloatAccess {
  get(i: number): number;
  set(i: number, x: number): void;
  /** The raw bits, for copies that must be bit-exact (NaN payloads included). */
  readonly bits: Uint16Array | Uint32Array;
}

class F32Access implements FloatAccess {
  readonly bits: Uint32Array;
  constructor(private readonly data: Float32Array) {
    this.bits = new Uint32Array(data.buffer, data.byteOffset, data.length);
  }
  get(i: number): number {
    return this.data[i]!;
  }
  set(i: number, x: number): void {
    this.data[i] = x; // a Float32Array store is one RNE rounding from f64
  }
}

class HalfAccess implements FloatAccess {
  constructor(
    readonly bits: Uint16Array,
    private readonly decode: (h: number) => number,
    private readonly encode: (x: number) => number,
  ) {}
  get(i: number): number {
    return this.decode(this.bits[i]!);
  }
  set(i: number, x: number): void {
    this.bits[i] = this.encode(x);
  }
}

export function floatAccess(dtype: DType, data: Storage): FloatAccess {
  switch (dtype as FloatDType) {
    case 'f32':
      return new F32Access(data as Float32Array);
    case 'f16':
      return new HalfAccess(data as Uint16Array, decodeF16, encodeF16);
    case 'bf16':
      return new HalfAccess(data as Uint16Array, decodeBf16, encodeBf16);
  }
}

/** Exact f32 copy of float storage: every f16, bf16 and fp8 value is an f32 value. */
export function decodeToF32(dtype: DType, data: Storage, into?: Float32Array): Float32Array {
  if (dtype === 'f32') {
    const out = into ?? new Float32Array(data.length);
    out.set(data as Float32Array);
    return out;
  }
  if (dtype === 'fp8e4m3' || dtype === 'fp8e5m2') return decodeFp8s(dtype, data as Uint8Array, into);
  return decodeHalves(dtype as 'f16' | 'bf16', data as Uint16Array, into);
}

/** Reads an i32 or i64 index as a number. */
export function indexAt(data: Storage, i: number): number {
  return Number(data[i]!);
}
