import type { DType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { Fp8DType } from '@kvkit/contracts';
import type { OwnedTensor, PoolLayoutName } from '@kvkit/contracts/backend';
import type { RopeRowsParams } from '../generated/params.js';
import type { DeviceStorage } from '../runtime/gpuRuntime.js';
import type { GpuTensor } from '../runtime/gpuTensor.js';
import { copyStrided } from '../runtime/views.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import type { PoolFormat } from '../shaders/kvPoolRows.wgsl.js';
import { tuning } from '../shaders/plan.js';

/** The uniforms every row kernel that writes pools takes (the kernels' declared poolWriteUniforms). */
export type PoolWriteParams = Pick<RopeRowsParams, 'pageSize' | 'kScaleAt' | 'kScaleStep' | 'vScaleAt' | 'vScaleStep'>;

/** The uniforms of a dispatch that writes no pool, or NHD pools of the model dtype. */
export const NO_POOL_WRITES: PoolWriteParams = { pageSize: 1, kScaleAt: 0, kScaleStep: 0, vScaleAt: 0, vScaleStep: 0 };

/**
 * Whether the row kernels write a call's pools themselves: every pool of the
 * model dtype, and fp8 pools whose head rows are whole words (D a multiple of
 * 4), so each invocation's codes fill words no other invocation touches.
 */
export function rowKernelsWrite(poolType: DType, D: number): boolean {
  return !isFp8(poolType) || D % 4 === 0;
}

/** What a call's pools ask of the row kernels. */
export interface PoolCall {
  readonly layout: PoolLayoutName;
  readonly dims: { readonly pageSize?: number };
  readonly kPool: OwnedTensor;
  readonly kScale?: OwnedTensor;
  readonly vScale?: OwnedTensor;
}

/** Words of `into` the fp8 scales of a call take (0 for pools of the model dtype). */
export function scaleWords(c: PoolCall): number {
  return (c.kScale?.shape[0] ?? 0) + (c.vScale?.shape[0] ?? 0);
}

/**
 * The pool format of a call (undefined for NHD pools of the model dtype, so
 * their pipelines stay as they were) and its uniforms. For fp8 the scales are
 * copied into `into` from word `at` on, past what the kernel reads there
 * already, so they need no binding of their own.
 */
export function poolWrites(k: WebGpuKernels, c: PoolCall, into: DeviceStorage, at: number): { format: PoolFormat | undefined; params: PoolWriteParams } {
  const fp8 = isFp8(c.kPool.dtype) ? (c.kPool.dtype as Fp8DType) : undefined;
  const pageSize = c.layout === 'HND' ? c.dims.pageSize! : 1;
  const format = c.layout === 'NHD' && !fp8 ? undefined : { layout: c.layout, ...(fp8 ? { fp8, fp8Exact: tuning.fp8Exact } : {}) };
  if (!fp8) return { format, params: { ...NO_POOL_WRITES, pageSize } };
  const [kScale, vScale] = [k.own(c.kScale!), k.own(c.vScale!)];
  const vAt = at + kScale.numel;
  place(k, kScale, into, at);
  place(k, vScale, into, vAt);
  return { format, params: { pageSize, kScaleAt: at, kScaleStep: kScale.numel > 1 ? 1 : 0, vScaleAt: vAt, vScaleStep: vScale.numel > 1 ? 1 : 0 } };
}

/** GPUBufferUsage.COPY_SRC. */
const USAGE_COPY_SRC = 0x4;

/** An f32 tensor (contiguous) into `into` from word `at`: a buffer copy, or the strided copy kernel where the application's buffer lacks COPY_SRC. */
function place(k: WebGpuKernels, t: GpuTensor, into: DeviceStorage, at: number): void {
  if ((t.storage.buffer.usage & USAGE_COPY_SRC) !== 0) k.runtime.copy(t.storage.buffer, t.byteOffset, into.buffer, at * 4, t.byteLength);
  else copyStrided(k, t, into.range(0, into.byteLength), at);
}
