import type { FloatDType, Fp8DType, IndexDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { MlaPoolFusedChecked, OwnedTensor } from '@kvkit/contracts/backend';
import type { BufferRange } from '../runtime/gpuRuntime.js';
import type { GpuTensor } from '../runtime/gpuTensor.js';
import { rowStrides, spanBinding } from '../runtime/views.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import type { MlaRowsParams, MlaRowsRanges } from '../generated/params.js';
import { fp8VectorsFit, mlaLayout, mlaRowsShader, mlaTokensPerWorkgroup, planMlaLatent, planMlaQueries } from '../shaders/mlaPoolFused.wgsl.js';
import type { MlaRowsPlan } from '../shaders/mlaPoolFused.wgsl.js';
import { storePoolRows } from './kvPools.js';
import { launchRopeTable } from './launch.js';
import { placeWords } from './pagedAttention.js';
import { angleTableRange } from './ropePoolFused.js';

/** Where kvLatent's rows start in its binding, in units of `elements`: a 2-D view whose rows are contiguous; undefined where they are not whole units. */
function latentRows(k: WebGpuKernels, t: OwnedTensor, elements: number): { range: BufferRange; offset: number; tokenStride: number } | undefined {
  const own = k.own(t);
  if (own.shape.length !== 2 || (own.strides[1] !== 1 && own.shape[1]! > 1)) return undefined;
  const { range, before } = spanBinding(k, own);
  const tokenStride = own.shape[0]! > 1 ? own.strides[0]! : own.shape[1]!;
  if (before % elements !== 0 || tokenStride % elements !== 0) return undefined;
  return { range, offset: before / elements, tokenStride: tokenStride / elements };
}

/** kvLatent and q are read in place through their strides wherever their rows are contiguous. */
export function mlaReadsStrided(k: WebGpuKernels, name: string, t: OwnedTensor): boolean {
  if (name === 'kvLatent') return latentRows(k, t, 1) !== undefined;
  if (name === 'q') return rowStrides(k, t, 1) !== undefined;
  return false;
}

/**
 * mlaPoolFused: the cos/sin row of every token (the fp8 scale after the
 * rows), the ownership pass that leaves each shared slot to its last token,
 * then one dispatch writing the latent rows into the pool (slots checked on
 * the device first) and one rotating the query rows into qRot. fp8 codes of
 * vectors narrower than a word go dense first, then through the pool pass.
 */
export function mlaPoolFused(k: WebGpuKernels, args: MlaPoolFusedChecked): { qRot?: OwnedTensor } {
  const op = 'mlaPoolFused';
  const { N, C, R, S } = args.dims;
  const W = C + R;
  const latent = k.own(args.kvLatent);
  const dtype = latent.dtype as FloatDType;
  const q = args.q ? k.own(args.q) : undefined;
  const { Hq = 0, Dq = 0 } = args.dims;
  // Every element of qRot is written below, so a recycled buffer serves as well as a zeroed one.
  const qRot = q ? k.allocateOverwritten(dtype, [N, Hq, Dq], op) : undefined;
  const out = qRot ? { qRot } : {};
  if (N === 0) return out;
  try {
    const pool = k.own(args.pool);
    const fp8 = isFp8(pool.dtype) ? (pool.dtype as Fp8DType) : undefined;
    const scratch = k.scratch('mlaPoolFused cos/sin', (N * R + 1) * 4);
    const table = scratch.range(0, N * R * 4);
    const withScale = scratch.range(0, (N * R + 1) * 4);
    launchRopeTable(k, k.own(args.positions).dtype as IndexDType, { positions: k.own(args.positions).range, angleTable: angleTableRange(k, { ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles }), table }, N, R);
    if (fp8) placeWords(k, k.own(args.scale!), scratch, N * R);
    const caps = k.runtime.caps;
    const base = { dtype, R, style: args.ropeStyle };

    const layout = mlaLayout(dtype, [C, R], W, (e) => latentRows(k, latent, e) !== undefined);
    const rows = latentRows(k, latent, layout.elements)!;
    const slots = k.own(args.slots);
    const scatter = !fp8 || fp8VectorsFit(layout);
    const weightType = k.own(args.kvNormWeight).dtype as FloatDType;
    const plan = planMlaLatent(caps, { ...base, C, layout, weightType, slotType: scatter ? (slots.dtype as IndexDType) : undefined, fp8: scatter ? fp8 : undefined });
    const uniforms = { rows: N, queryHeads: Hq, slotBelow: S, eps: args.eps, latentOffset: rows.offset, latentTokenStride: rows.tokenStride, qOffset: 0, qTokenStride: 0, qHeadStride: 0, scaleAt: N * R };
    const common = { latent: rows.range, weight: k.own(args.kvNormWeight).range, cosSin: withScale };
    if (scatter) {
      const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims);
      const owned = k.slotOwners.resolve(slots, N, S, args.duplicates.slots, op);
      dispatchRows(k, plan, { ...common, slots: owned, pool: pool.range, flags }, { ...uniforms, callFlag: call }, N);
    } else {
      // fp8 codes that would share words: the rows dense in the model dtype, then the pool pass (its own checks and claims).
      const dense = k.scratch('mlaPoolFused rows', Math.ceil((N * W * (dtype === 'f32' ? 4 : 2)) / 4) * 4);
      const denseRange = dense.range(0, dense.byteLength);
      dispatchRows(k, plan, { ...common, pool: denseRange }, { ...uniforms, callFlag: 0 }, N);
      const job = { sourceType: dtype, layers: 1, tokens: N, sourceLayerElements: 0, layout: 'NHD' as const, dims: { S, H: 1, D: W }, slots, duplicates: args.duplicates.slots, rules: args.deviceChecks, op };
      // The call's own checks, so a bad value is reported with the call's dims.
      storePoolRows(k, job, [{ source: denseRange, rows: { offset: 0, tokenStride: W, headStride: W }, pool, scale: k.own(args.scale!) as GpuTensor }], k.checks.reserve(args.deviceChecks, args.dims));
    }

    if (q && qRot) {
      const qLayout = mlaLayout(dtype, [Dq - R, R], Dq, (e) => rowStrides(k, q, e) !== undefined);
      const strides = rowStrides(k, q, qLayout.elements)!;
      const qPlan = planMlaQueries(caps, { ...base, Dq, layout: qLayout });
      const qUniforms = { ...uniforms, rows: N * Hq, qOffset: strides.offset, qTokenStride: strides.tokenStride, qHeadStride: strides.headStride, callFlag: 0 };
      dispatchRows(k, qPlan, { q: strides.range, cosSin: table, qRot: qRot.range }, qUniforms, N * Hq);
    }
  } catch (e) {
    // A kernel that failed to build (KV055) throws here: the output made for this call goes with it.
    qRot?.dispose();
    throw e;
  }
  return out;
}

function dispatchRows(k: WebGpuKernels, plan: MlaRowsPlan, ranges: MlaRowsRanges, uniforms: MlaRowsParams, rows: number): void {
  const kernel = k.runtime.kernel(plan, () => mlaRowsShader(plan));
  const groups = plan.part === 'latent' ? Math.ceil(rows / mlaTokensPerWorkgroup(plan)) : Math.ceil((rows * plan.layout.rowVecs) / plan.workgroupSize);
  k.runtime.dispatch(kernel, ranges, uniforms, groups);
}
