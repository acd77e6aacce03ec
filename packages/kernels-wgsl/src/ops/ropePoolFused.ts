import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { OwnedTensor, RopePoolFusedChecked } from '@kvkit/contracts/backend';
import { ropeAngles, ropeAnglesKey, ropeAngleTable } from '@kvkit/contracts/backend';
import type { RopeSpec } from '@kvkit/contracts/backend';
import type { BufferRange, DeviceStorage } from '../runtime/gpuRuntime.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { ROPE_ALL_BINDINGS, rowLayout } from '../shaders/plan.js';
import { rowStrides } from '../runtime/views.js';
import { storePoolRows } from './kvPools.js';
import { launchRopeRows, launchRopeTable } from './launch.js';
import { poolWrites, rowKernelsWrite, scaleWords } from './poolWrites.js';
import { ropeNormDense, ropeNormPool } from './ropeNormPool.js';

/** Angle tables (backend/rope.ts ropeAngleTable), per backend, by spec: made once, kept for the backend's life. */
const angleTables = new WeakMap<WebGpuKernels, Map<string, DeviceStorage>>();

export function angleTableRange(k: WebGpuKernels, spec: RopeSpec): BufferRange {
  let bySpec = angleTables.get(k);
  if (!bySpec) {
    bySpec = new Map();
    angleTables.set(k, bySpec);
  }
  const key = ropeAnglesKey(spec);
  let s = bySpec.get(key);
  if (!s) {
    const table = ropeAngleTable(ropeAngles(spec));
    s = k.storage(table.byteLength, 'kvkit rope angle table', 'ropePoolFused', undefined, true);
    new Uint32Array(s.buffer.getMappedRange()).set(table);
    s.buffer.unmap();
    bySpec.set(key, s);
  }
  return s.range(0, s.byteLength);
}

/** q, k and v are read through their token and head strides wherever their head rows are contiguous, in whole row vectors. */
export function readsStrided(k: WebGpuKernels, args: RopePoolFusedChecked, name: string, t: OwnedTensor): boolean {
  if (name !== 'q' && name !== 'k' && name !== 'v') return false;
  return rowStrides(k, t, rowLayout(t.dtype as FloatDType, args.dims.D).elements) !== undefined;
}

/** The strides uniforms of q, k and v, and their bindings. */
export function stridedInputs(k: WebGpuKernels, args: RopePoolFusedChecked, dtype: FloatDType) {
  const unit = rowLayout(dtype, args.dims.D).elements;
  const [q, key, v] = [args.q, args.k, args.v].map((t) => rowStrides(k, t, unit)!);
  return {
    ranges: { q: q!.range, k: key!.range, v: v!.range },
    params: {
      qOffset: q!.offset,
      qTokenStride: q!.tokenStride,
      qHeadStride: q!.headStride,
      kOffset: key!.offset,
      kTokenStride: key!.tokenStride,
      kHeadStride: key!.headStride,
      vOffset: v!.offset,
      vTokenStride: v!.tokenStride,
      vHeadStride: v!.headStride,
    },
  };
}

/** What both row kernels (RoPE only, and Q/K-norm) take of q, k and v: bindings and strides uniforms. */
export type StridedInputs = ReturnType<typeof stridedInputs>;

/**
 * SEMANTICS §3: the cos/sin row of every token (from ropeBase and ropeScaling), the
 * ownership pass that leaves each shared slot to one token (the contract's
 * rule), then RoPE of the query and key heads with the pool scatter and the V
 * copy (slots checked on the device; either layout, fp8 codes for fp8 pools,
 * whose scales follow the cos/sin rows), in one dispatch where the device
 * allows ten storage bindings, else in two. fp8 pools of a head dim that is
 * not a multiple of 4 share words between rows: the rows are rotated dense
 * and the pool pass stores them.
 */
export function ropePoolFused(k: WebGpuKernels, args: RopePoolFusedChecked) {
  const { N, Hq, H, D, R, S } = args.dims;
  const q = k.own(args.q);
  const dtype = q.dtype as FloatDType;
  // Every element of qRot and kRot is written below, so a recycled buffer serves as well as a zeroed one.
  const qRot = k.allocateOverwritten(dtype, [N, Hq, D], 'ropePoolFused');
  const kRot = k.allocateOverwritten(dtype, [N, H, D], 'ropePoolFused');
  if (N === 0) return { qRot, kRot };
  try {
    const positions = k.own(args.positions);
    const slots = k.own(args.slots);
    const scratch = k.scratch('ropePoolFused cos/sin', (N * R + scaleWords(args)) * 4);
    const table = scratch.range(0, N * R * 4);
    launchRopeTable(k, positions.dtype as IndexDType, { positions: positions.range, angleTable: angleTableRange(k, { ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles }), table }, N, R, args.mropeSection, args.mropeInterleaved);
    const rope = { dtype, D, R, style: args.ropeStyle, slotType: slots.dtype as IndexDType };
    const inputs = stridedInputs(k, args, dtype);
    if (!rowKernelsWrite(args.kPool.dtype, D)) {
      // fp8 rows that share words: q and k (normed where asked) as dense rows, then K and V through the pool pass.
      ropeNormDense(k, args, { table, qRot: qRot.range, kRot: kRot.range, inputs });
      const v = rowStrides(k, args.v, 1)!;
      const job = { sourceType: dtype, layers: 1, tokens: N, sourceLayerElements: 0, layout: args.layout, dims: args.dims, slots, duplicates: args.duplicates.slots, rules: args.deviceChecks, op: 'ropePoolFused' };
      storePoolRows(k, job, [
        { source: kRot.range, rows: { offset: 0, tokenStride: H * D, headStride: D }, pool: k.own(args.kPool), scale: k.own(args.kScale!) },
        { source: v.range, rows: { offset: v.offset, tokenStride: v.tokenStride, headStride: v.headStride }, pool: k.own(args.vPool), scale: k.own(args.vScale!) },
      ]);
      return { qRot, kRot };
    }
    const pools = poolWrites(k, args, scratch, N * R);
    const withScales = scratch.range(0, (N * R + scaleWords(args)) * 4);
    const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims);
    const owned = k.slotOwners.resolve(slots, N, S, args.duplicates.slots, 'ropePoolFused');
    const keys = { k: inputs.ranges.k, v: inputs.ranges.v, slots: owned, kRot: kRot.range, kPool: k.own(args.kPool).range, vPool: k.own(args.vPool).range, flags };
    const at = { queryHeads: Hq, keyHeads: H, slotBelow: S, callFlag: call, ...inputs.params, ...pools.params };
    const pooled = { ...rope, pool: pools.format };
    if (args.qNormWeight || args.kNormWeight) {
      ropeNormPool(k, args, { table: withScales, owned, flags, callFlag: call, qRot: qRot.range, kRot: kRot.range, inputs, pools });
    } else if (k.runtime.caps.maxStorageBuffersPerStage >= ROPE_ALL_BINDINGS) {
      launchRopeRows(k, { ...pooled, kind: 'all' }, { q: inputs.ranges.q, cosSin: withScales, qRot: qRot.range, ...keys }, { ...at, rows: N * (Hq + H) });
    } else {
      launchRopeRows(k, { ...rope, kind: 'q', slotType: undefined }, { q: inputs.ranges.q, cosSin: table, qRot: qRot.range }, { ...at, rows: N * Hq });
      launchRopeRows(k, { ...pooled, kind: 'kv' }, { cosSin: withScales, ...keys }, { ...at, rows: N * H });
    }
  } catch (e) {
    // A kernel that failed to build (KV055) throws here: the outputs made for this call go with it.
    qRot.dispose();
    kRot.dispose();
    throw e;
  }
  return { qRot, kRot };
}
