import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import type { BufferRange } from '../runtime/gpuRuntime.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { ROPE_NORM_ROWS } from '../generated/params.js';
import type { PoolFormat } from '../shaders/kvPoolRows.wgsl.js';
import { launchRopeNormRows } from './launch.js';
import { NO_POOL_WRITES } from './poolWrites.js';
import type { PoolWriteParams } from './poolWrites.js';
import type { StridedInputs } from './ropePoolFused.js';

/** Storage bindings of the one-dispatch Q/K-norm kernel with both weights (every part on). */
const ALL_PARTS_BINDINGS = ROPE_NORM_ROWS.bindings({ queries: true, queryNorm: true, keys: true, keyNorm: true, values: true, rotates: true, pool: true, Row: 'u32', Dst: 'u32', Pool: 'u32' }).specs.length;

/** What ropePoolFused has ready when a Q/K-norm runs: the cos/sin table (the fp8 scales after it), the owned slots, the outputs, the slot rule's flag word, q, k, v as the kernels read them and the pools' format. */
export interface RopeNormPoolInputs {
  readonly table: BufferRange;
  readonly owned: BufferRange;
  readonly flags: BufferRange;
  /** The call's flag word: the key rows write nothing once it is raised. */
  readonly callFlag: number;
  readonly qRot: BufferRange;
  readonly kRot: BufferRange;
  readonly inputs: StridedInputs;
  readonly pools: { readonly format: PoolFormat | undefined; readonly params: PoolWriteParams };
}

/**
 * The Q/K-norm path of ropePoolFused: RMSNorm and RoPE of q and k rows in
 * registers, keys and values into the pools (either layout, fp8 codes for fp8
 * pools), in one dispatch where the
 * device allows the bindings, else q, k and v rows in three. q, k and v are
 * read through their strides (views of a fused qkv projection among them).
 */
export function ropeNormPool(k: WebGpuKernels, args: RopePoolFusedChecked, at: RopeNormPoolInputs): void {
  const { N, Hq, H, D, R, S } = args.dims;
  const q = k.own(args.q);
  const qWeight = args.qNormWeight && k.own(args.qNormWeight);
  const kWeight = args.kNormWeight && k.own(args.kNormWeight);
  const request = {
    dtype: q.dtype as FloatDType,
    D,
    R,
    style: args.ropeStyle,
    queryWeight: qWeight?.dtype as FloatDType | undefined,
    keyWeight: kWeight?.dtype as FloatDType | undefined,
    slotType: k.own(args.slots).dtype as IndexDType,
    pool: at.pools.format,
  };
  const ranges = {
    ...at.inputs.ranges,
    cosSin: at.table,
    ...(qWeight ? { qWeight: qWeight.range } : {}),
    ...(kWeight ? { kWeight: kWeight.range } : {}),
    slots: at.owned,
    qRot: at.qRot,
    kRot: at.kRot,
    kPool: k.own(args.kPool).range,
    vPool: k.own(args.vPool).range,
    flags: at.flags,
  };
  const uniforms = { queryHeads: Hq, keyHeads: H, slotBelow: S, callFlag: at.callFlag, eps: args.eps ?? 0, ...at.inputs.params, ...at.pools.params };
  if (k.runtime.caps.maxStorageBuffersPerStage >= ALL_PARTS_BINDINGS) {
    launchRopeNormRows(k, { ...request, queries: true, keys: true, values: true }, ranges, { ...uniforms, rows: N * (Hq + H) });
    return;
  }
  // What a part does not read stays out of its plan, so equal parts share a pipeline.
  launchRopeNormRows(k, { ...request, keyWeight: undefined, slotType: undefined, pool: undefined, queries: true, keys: false, values: false }, ranges, { ...uniforms, rows: N * Hq });
  launchRopeNormRows(k, { ...request, queryWeight: undefined, queries: false, keys: true, values: false }, ranges, { ...uniforms, rows: N * H });
  launchRopeNormRows(k, { ...request, queryWeight: undefined, keyWeight: undefined, queries: false, keys: false, values: true }, ranges, { ...uniforms, rows: N * H });
}

/**
 * RoPE (and the Q/K-norm, where asked) for fp8 pools whose rows share words
 * (D not a multiple of 4): q rows, then k rows, normed and rotated as dense
 * rows by the queries-only part (each tensor taken as the query rows, its
 * own weight, if any, as the query weight); the pool store pass then takes
 * kRot into the pool.
 */
export function ropeNormDense(k: WebGpuKernels, args: RopePoolFusedChecked, at: Pick<RopeNormPoolInputs, 'table' | 'qRot' | 'kRot' | 'inputs'>): void {
  const { N, Hq, H, D, R, S } = args.dims;
  const dtype = k.own(args.q).dtype as FloatDType;
  const { params, ranges } = at.inputs;
  const uniforms = { keyHeads: H, slotBelow: S, callFlag: 0, eps: args.eps ?? 0, ...params, ...NO_POOL_WRITES };
  const parts = [
    { src: ranges.q, weight: args.qNormWeight, dst: at.qRot, heads: Hq, strides: {} },
    { src: ranges.k, weight: args.kNormWeight, dst: at.kRot, heads: H, strides: { qOffset: params.kOffset, qTokenStride: params.kTokenStride, qHeadStride: params.kHeadStride } },
  ];
  for (const part of parts) {
    const weight = part.weight && k.own(part.weight);
    const request = { dtype, D, R, style: args.ropeStyle, queryWeight: weight?.dtype as FloatDType | undefined, keyWeight: undefined, slotType: undefined, queries: true, keys: false, values: false };
    const partRanges = { q: part.src, cosSin: at.table, ...(weight ? { qWeight: weight.range } : {}), qRot: part.dst };
    launchRopeNormRows(k, request, partRanges, { ...uniforms, ...part.strides, queryHeads: part.heads, rows: N * part.heads });
  }
}
