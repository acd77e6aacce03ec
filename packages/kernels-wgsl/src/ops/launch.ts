/**
 * Launch glue shared by the ops: plan a kernel, fetch its pipeline from the
 * cache, size the grid, record the dispatch. The ops decide what to bind.
 */
import type { FloatDType, IndexDType } from '@kvkit/contracts';
import { mropeLayout } from '@kvkit/contracts/backend';
import type { NormRopeRanges, RopeNormRowsParams, RopeNormRowsRanges, RopeRowsParams, RopeRowsRanges } from '../generated/params.js';
import type { BufferRange } from '../runtime/gpuRuntime.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { normRopeShader } from '../shaders/fusedNormRopeStacked.wgsl.js';
import { poolVectorBytes } from '../shaders/kvPoolRows.wgsl.js';
import { gemmSplits, planGemm, planGemmReduce, planNormRope, planRopeNormRows, planRopeRows, planRopeTable, ropeRowUnits } from '../shaders/plan.js';
import type { NormRopeRequest, RopeNormRowsRequest, RopeRowsRequest } from '../shaders/plan.js';
import { gemmReduceShader, projectionGemmShader } from '../shaders/projectionGemm.wgsl.js';
import { ropeNormRowsShader } from '../shaders/ropeNormRows.wgsl.js';
import { ropeRowsShader } from '../shaders/ropePoolFused.wgsl.js';
import { ropeTableShader } from '../shaders/ropeTable.wgsl.js';
import { NO_POOL_WRITES } from './poolWrites.js';
import type { PoolWriteParams } from './poolWrites.js';

export interface NormRopeLaunch {
  readonly tokens: number;
  readonly layers: number;
  readonly heads: number;
  /** Exclusive bound of valid positions: the contract's, P for a cache (or 2^31 with ropeBase in the materializer). */
  readonly positionBelow: number;
  /** Pool slots (scatter), or 0. */
  readonly slotBelow: number;
  /** Distance between layers of the destination, in bytes (outputs may pad layers to 256 bytes). */
  readonly destLayerBytes: number;
  /** The call's flag word (DeviceChecks.reserve): the kernel writes nothing once it is raised. */
  readonly callFlag: number;
  readonly epsWordOffset: number;
  /** The pools' page size and fp8 scales, where the scatter writes pools that take them. */
  readonly pool?: PoolWriteParams;
  /** mRoPE: positions are [3, T], pairs split over the streams by this section. */
  readonly mropeSection?: readonly number[] | undefined;
  /** mRoPE's interleaved layout (Qwen3-VL) of mropeSection. */
  readonly mropeInterleaved?: boolean;
}

/** The uniforms of mRoPE's streams (ropeTable, normRope): one stream without a section. */
function streamUniforms(tokens: number, half: number, mropeSection: readonly number[] | undefined, interleaved: boolean | undefined) {
  if (!mropeSection) return { streamStride: 0, temporalPairs: half, heightPairsEnd: half, interleaved: 0 };
  const layout = mropeLayout(mropeSection, interleaved);
  return { streamStride: tokens, temporalPairs: layout.ends[0], heightPairsEnd: layout.ends[1], interleaved: layout.interleaved ? 1 : 0 };
}

/** RMSNorm + RoPE of every K head and the V copy (fusedNormRopeStacked.wgsl.ts). */
export function launchNormRope(k: WebGpuKernels, request: NormRopeRequest, ranges: NormRopeRanges, at: NormRopeLaunch): void {
  const plan = planNormRope(k.runtime.caps, request, at.mropeSection !== undefined);
  const kernel = k.runtime.kernel(plan, () => normRopeShader(plan));
  const rows = at.tokens * at.layers * at.heads;
  const half = request.R / 2;
  const vectorBytes = poolVectorBytes(plan.layout, request.kvType === 'f32' ? 4 : 2, plan.pool?.fp8);
  k.runtime.dispatch(
    kernel,
    ranges,
    {
      tokens: at.tokens,
      layers: at.layers,
      heads: at.heads,
      rows,
      positionBelow: at.positionBelow,
      ...streamUniforms(at.tokens, half, at.mropeSection, at.mropeInterleaved),
      slotBelow: at.slotBelow,
      callFlag: at.callFlag,
      epsWordOffset: at.epsWordOffset,
      destLayerStride: at.destLayerBytes / vectorBytes,
      ...(at.pool ?? NO_POOL_WRITES),
    },
    Math.ceil(rows / (plan.workgroupSize / plan.lanesPerRow)),
  );
}

/** RoPE of head rows without a norm (ropePoolFused.wgsl.ts): 'q' into a dense output, 'kv' into kRot and the pools. */
export function launchRopeRows(
  k: WebGpuKernels,
  request: RopeRowsRequest,
  ranges: RopeRowsRanges,
  at: RopeRowsParams,
): void {
  const plan = planRopeRows(k.runtime.caps, request);
  const kernel = k.runtime.kernel(plan, () => ropeRowsShader(plan));
  // V rows on lanes of their own follow each token's K rows: N × H rows more.
  const rows = plan.valueLanes ? at.rows + (at.rows / ((plan.kind === 'all' ? at.queryHeads : 0) + at.keyHeads)) * at.keyHeads : at.rows;
  k.runtime.dispatch(kernel, ranges, { ...at, rows }, Math.ceil((rows * ropeRowUnits(plan)) / plan.workgroupSize));
}

/** Q/K-norm then RoPE of head rows, keys and values into the pools (ropeNormRows.wgsl.ts): one dispatch of the parts asked for. */
export function launchRopeNormRows(k: WebGpuKernels, request: RopeNormRowsRequest, ranges: RopeNormRowsRanges, at: RopeNormRowsParams): void {
  const plan = planRopeNormRows(k.runtime.caps, request);
  const kernel = k.runtime.kernel(plan, () => ropeNormRowsShader(plan));
  k.runtime.dispatch(kernel, ranges, at, Math.ceil(at.rows / (plan.workgroupSize / plan.lanesPerRow)));
}

/** cos/sin rows, one per token, from positions and the angle table (ropeTable.wgsl.ts); `mropeSection` reads [3, T] streams, interleaved where `mropeInterleaved` says. */
export function launchRopeTable(
  k: WebGpuKernels,
  positionType: IndexDType,
  ranges: { positions: BufferRange; angleTable: BufferRange; table: BufferRange },
  tokens: number,
  rotaryDim: number,
  mropeSection?: readonly number[],
  mropeInterleaved?: boolean,
): void {
  const plan = planRopeTable(k.runtime.caps, positionType);
  const kernel = k.runtime.kernel(plan, () => ropeTableShader(plan));
  const half = rotaryDim / 2;
  const streams = streamUniforms(tokens, half, mropeSection, mropeInterleaved);
  k.runtime.dispatch(kernel, ranges, { tokens, halfRotary: half, ...streams }, Math.ceil((tokens * half) / plan.workgroupSize));
}

/**
 * C[M, N] = A[M, K] · W[N, K]^T in `dtype` (projectionGemm.wgsl.ts). Few
 * tiles (few tokens) split K over more workgroups, into f32 partial sums that
 * a second pass adds and rounds once.
 */
export function launchGemm(k: WebGpuKernels, dtype: FloatDType, ranges: { a: BufferRange; w: BufferRange; c: BufferRange }, shape: { M: number; N: number; K: number }): void {
  const caps = k.runtime.caps;
  const full = planGemm(caps, dtype, { T: shape.M, K: shape.K });
  const { splits, kPerSplit } = gemmSplits(full, shape);
  const plan = splits > 1 ? planGemm(caps, dtype, { T: shape.M, K: shape.K }, true) : full;
  const kernel = k.runtime.kernel(plan, () => projectionGemmShader(plan));
  const tilesN = Math.ceil(shape.N / plan.tileN);
  const tiles = Math.ceil(shape.M / plan.tileM) * tilesN;
  const params = { rows: shape.M, cols: shape.N, depth: shape.K, tilesN, tiles, kPerSplit };
  if (splits === 1) {
    k.runtime.dispatch(kernel, ranges, params, tiles);
    return;
  }
  const elements = shape.M * shape.N;
  const partial = k.scratch('gemm partial sums', splits * elements * 4).range(0, splits * elements * 4);
  k.runtime.dispatch(kernel, { a: ranges.a, w: ranges.w, c: partial }, params, tiles * splits);
  const reducePlan = planGemmReduce(caps, dtype);
  const reduce = k.runtime.kernel(reducePlan, () => gemmReduceShader(reducePlan));
  const words = dtype === 'f32' ? elements : elements / 2;
  k.runtime.dispatch(reduce, { partial, c: ranges.c }, { words, elements, splits }, Math.ceil(words / reducePlan.workgroupSize));
}
