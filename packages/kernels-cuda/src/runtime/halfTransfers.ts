/**
 * f16/bf16 host transfers through f32 on the device: `tensor()` uploads the
 * caller's Float32Array as it is and a kernel rounds it, `read()` widens on
 * the device, a chunk at a time, and downloads f32. The host then moves bytes
 * only, at copy speed, instead of running the codec per element (about 1 GB/s
 * on one core).
 * The kernels follow the host codec bit for bit (halves.cu).
 */
import type { DType } from '@kvkit/contracts';
import { LAUNCHES } from '../generated/kernels.js';
import type { CudaKernels } from './cudaKernels.js';

/** Below this many elements a launch and a scratch buffer cost more than the host codec. */
const DEVICE_CONVERSION_MIN = 1 << 16;

export type HalfDType = 'f16' | 'bf16';

export function isHalf(dtype: DType): dtype is HalfDType {
  return dtype === 'f16' || dtype === 'bf16';
}

/** Whether a transfer of `count` elements goes through the device conversion. */
export function convertsOnDevice(count: number): boolean {
  return count >= DEVICE_CONVERSION_MIN;
}

function launchHalves(k: CudaKernels, entry: `halves_${'from' | 'to'}_f32_${HalfDType}`, src: number, dst: number, count: number, op: string): void {
  const { threads } = LAUNCHES.halves.default;
  k.params.halves.write({ src, dst, count });
  k.cx.launch(entry, k.params.halves, Math.min(Math.ceil(count / threads), k.cx.multiprocessors * 16), 1, threads, 0, op);
}

/** Uploads f32 values into a scratch buffer and rounds them into the halves at `dst`; stream-ordered. */
export function uploadHalves(k: CudaKernels, dtype: HalfDType, dst: number, values: Float32Array, op: string): void {
  const scratch = k.cx.alloc(values.byteLength, op);
  try {
    k.cx.upload(scratch.ptr, values, op);
    launchHalves(k, `halves_from_f32_${dtype}`, scratch.ptr, dst, values.length, op);
  } finally {
    scratch.release(); // stream-ordered: freed once the conversion has read it
  }
}

/** Widens `count` halves at `src` into f32 values at `dst`; stream-ordered. */
export function widenHalves(k: CudaKernels, dtype: HalfDType, src: number, dst: number, count: number, op: string): void {
  launchHalves(k, `halves_to_f32_${dtype}`, src, dst, count, op);
}
