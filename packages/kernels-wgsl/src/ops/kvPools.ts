import type { FloatDType, Fp8DType, IndexDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { DequantizeKvChecked, DeviceCheck, DuplicateRule, PoolLayoutName } from '@kvkit/contracts/backend';
import type { CallFlags } from '../runtime/deviceChecks.js';
import type { BufferRange } from '../runtime/gpuRuntime.js';
import type { GpuTensor } from '../runtime/gpuTensor.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { tuning } from '../shaders/plan.js';
import { poolReadShader, poolStoreShader, storedBytes } from '../shaders/poolStore.wgsl.js';
import type { PoolReadPlan, PoolStorePlan } from '../shaders/poolStore.wgsl.js';

/** Where a source's rows lie in its binding, in elements: element 0, and the steps between tokens and between heads (rows contiguous). */
export interface SourceRows {
  readonly offset: number;
  readonly tokenStride: number;
  readonly headStride: number;
}

/** Rows `[L, T, H, D]` of the model dtype bound as `source`, for one fp8 pool and its scale. */
export interface PoolRows {
  readonly source: BufferRange;
  readonly rows: SourceRows;
  readonly pool: GpuTensor;
  readonly scale: GpuTensor;
}

export interface PoolStoreJob {
  readonly sourceType: FloatDType;
  readonly layers: number;
  readonly tokens: number;
  /** Elements between layers of the sources (layer views may be padded). */
  readonly sourceLayerElements: number;
  readonly layout: PoolLayoutName;
  readonly dims: { readonly S: number; readonly H: number; readonly D: number; readonly pageSize?: number };
  readonly slots: GpuTensor;
  readonly duplicates: DuplicateRule;
  /** The call's rules the device checks (none where the host did). */
  readonly rules: readonly DeviceCheck[];
  readonly op: string;
}

/**
 * K and V rows into fp8 pools whose head dim is not a multiple of 4 (rows
 * that share words, which the row kernels do not write): the ownership pass
 * (one token per contested slot), then one dispatch per pool, each writing
 * nothing once the call's flag word is raised. `gate`: the flag word the
 * call reserved already; else the call's rules are reserved and checked here.
 */
export function storePoolRows(k: WebGpuKernels, job: PoolStoreJob, pools: readonly PoolRows[], gate?: CallFlags): void {
  const { S, H, D } = job.dims;
  const pageSize = job.layout === 'HND' ? job.dims.pageSize! : S;
  const { flags, call } = gate ?? k.checks.reserve(job.rules, job.dims);
  const owned = k.slotOwners.resolve(job.slots, job.tokens, S, job.duplicates, job.op);
  const segments = job.layout === 'NHD' ? 1 : H;
  const run = (H * D) / segments;
  for (const { source, rows, pool, scale } of pools) {
    const wholeWords = run % 4 === 0;
    const plan: PoolStorePlan = {
      kernel: 'poolStore',
      f16: k.runtime.caps.f16,
      sourceType: job.sourceType,
      poolType: pool.dtype as Fp8DType,
      slotType: job.slots.dtype as IndexDType,
      layout: job.layout,
      wholeWords,
      workgroupSize: Math.min(tuning.rowWorkgroup, k.runtime.caps.maxInvocationsPerWorkgroup),
    };
    const kernel = k.runtime.kernel(plan, () => poolStoreShader(plan));
    const segmentUnits = wholeWords ? run / 4 : run;
    const units = job.layers * job.tokens * segments * segmentUnits;
    const params = {
      units,
      tokens: job.tokens,
      heads: H,
      headDim: D,
      segments,
      segmentUnits,
      slotBelow: S,
      pageSize,
      sourceLayerElements: job.sourceLayerElements,
      sourceOffset: rows.offset,
      sourceTokenStride: rows.tokenStride,
      sourceHeadStride: rows.headStride,
      callFlag: call,
      perHeadScale: scale.numel > 1 ? 1 : 0,
    };
    k.runtime.dispatch(kernel, { source, slots: owned, scale: scale.range, pool: pool.range, flags }, params, Math.ceil(units / plan.workgroupSize));
  }
}

/** Bytes of the workgroup table of fp8 codes a dequantizeKv workgroup may hold. */
const POOL_READ_TABLE_BYTES = 16384;

/**
 * dequantizeKv: one dispatch of the streaming kernel over units of the rows
 * (16, 8 or 4 bytes: the largest that divides a head row), or element by
 * element for 16-bit rows of odd D; at most tuning.poolReadWorkgroups
 * workgroups, each invocation taking tuning.poolReadUnits units a step.
 */
export function dequantizeKv(k: WebGpuKernels, args: DequantizeKvChecked): void {
  const { N, S, H, D } = args.dims;
  if (N === 0) return;
  const pool = k.own(args.pool);
  const rows = k.own(args.rows);
  const slots = k.own(args.slots);
  const rowsType = rows.dtype as FloatDType;
  const rowBytes = D * storedBytes(rowsType);
  const unitBytes = rowBytes % 16 === 0 ? 16 : rowBytes % 8 === 0 ? 8 : rowBytes % 4 === 0 ? 4 : 0;
  const elements = unitBytes / storedBytes(rowsType);
  const scale = args.scale ? k.own(args.scale) : undefined;
  const fp8 = isFp8(pool.dtype);
  const perHeadScale = scale !== undefined && scale.numel > 1;
  const tableHeads = perHeadScale ? H : 1;
  const caps = k.runtime.caps;
  const table = fp8 && elements > 0 && tuning.poolReadFp8 === 'table' && tableHeads * 256 * 4 <= Math.min(POOL_READ_TABLE_BYTES, caps.maxWorkgroupStorageBytes);
  const pageSize = args.layout === 'HND' ? args.dims.pageSize! : S;
  const plan: PoolReadPlan = {
    kernel: 'poolRead',
    f16: caps.f16,
    poolType: pool.dtype as PoolReadPlan['poolType'],
    rowsType,
    slotType: slots.dtype as IndexDType,
    layout: args.layout,
    pageShift: args.layout === 'HND' && (pageSize & (pageSize - 1)) === 0,
    elements,
    unitsPerStep: elements > 0 ? Math.max(1, tuning.poolReadUnits) : 1,
    fp8Decode: fp8 && elements > 0 ? (table ? 'table' : 'bits') : undefined,
    tableHeads: table ? tableHeads : 1,
    workgroupSize: Math.min(tuning.rowWorkgroup, caps.maxInvocationsPerWorkgroup),
  };
  const kernel = k.runtime.kernel(plan, () => poolReadShader(plan));
  const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims);
  const rowUnits = elements > 0 ? D / elements : D;
  const units = N * H * rowUnits;
  const params = { units, heads: H, headDim: D, rowUnits, slotBelow: S, pageSize, callFlag: call, perHeadScale: perHeadScale ? 1 : 0 };
  const needed = Math.ceil(units / (plan.workgroupSize * plan.unitsPerStep));
  const workgroups = elements > 0 ? Math.min(needed, Math.max(1, tuning.poolReadWorkgroups)) : needed;
  k.runtime.dispatch(kernel, { pool: pool.range, slots: slots.range, ...(scale && fp8 ? { scale: scale.range } : {}), rows: rows.range, flags }, params, workgroups);
}
