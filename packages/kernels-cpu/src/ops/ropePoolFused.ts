import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import { mropeLayout, ropeAngles, writeCosSinRow, writeMropeCosSinRow } from '@kvkit/contracts/backend';
import { rmsNormInPlace } from '../math/rmsNorm.js';
import type { Readable } from '../math/rmsNorm.js';
import { rotateInPlace } from '../math/rope.js';
import type { RopeStyle } from '../math/rope.js';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { FloatAccess } from '../runtime/floatAccess.js';
import { cosSinScratch, headScratch } from '../runtime/scratch.js';
import { poolTarget, storePoolRows } from './poolStore.js';

/** SEMANTICS §3: RoPE on q and k (angles from ropeBase and ropeScaling, reduced exactly, in f64; Q/K-norm first where given), then k and v scattered into the pools. */
export function ropePoolFused(backend: CpuKernels, args: RopePoolFusedChecked) {
  const { N, Hq, H, D, R } = args.dims;
  const q = backend.own(args.q);
  const dtype = q.dtype;
  const qRot = backend.allocate(dtype, [N, Hq, D]);
  const kRot = backend.allocate(dtype, [N, H, D]);
  const positions = backend.own(args.positions).data;
  const angles = ropeAngles({ ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles });
  const cs = cosSinScratch(R);
  const eps = args.eps ?? 0;
  const qRope = { D, R, style: args.ropeStyle, cs, norm: args.qNormWeight && { weight: backend.floats(args.qNormWeight), eps } };
  const kRope = { D, R, style: args.ropeStyle, cs, norm: args.kNormWeight && { weight: backend.floats(args.kNormWeight), eps } };
  const bounds = args.mropeSection && mropeLayout(args.mropeSection, args.mropeInterleaved);
  const streams = [0, 0, 0];
  const qIn = floatAccess(dtype, q.data);
  const kIn = backend.floats(args.k);
  const qOut = floatAccess(dtype, qRot.data);
  const kOut = floatAccess(dtype, kRot.data);
  for (let n = 0; n < N; n++) {
    if (bounds) {
      // positions is [3, N]: stream s of token n at s * N + n.
      for (let s = 0; s < 3; s++) streams[s] = indexAt(positions, s * N + n);
      writeMropeCosSinRow(cs, 0, streams, bounds, angles);
    } else {
      writeCosSinRow(cs, 0, indexAt(positions, n), angles);
    }
    rotateHeads(qIn, qOut, n * Hq * D, Hq, qRope);
    rotateHeads(kIn, kOut, n * H * D, H, kRope);
  }

  // The contract (KV039) keeps q, k and v apart from the pools, so the scatter never reads its own writes.
  const slots = { values: backend.own(args.slots).data, duplicates: args.duplicates.slots };
  storePoolRows(poolTarget(backend, args.kPool, args.kScale, args.layout, args.dims), 0, kOut, 0, slots, N);
  storePoolRows(poolTarget(backend, args.vPool, args.vScale, args.layout, args.dims), 0, backend.floats(args.v), 0, slots, N);
  return { qRot, kRot };
}

interface HeadRope {
  readonly D: number;
  readonly R: number;
  readonly style: RopeStyle;
  readonly cs: Float64Array;
  /** Q/K-norm: RMSNorm of each head over D before RoPE, x · inv · weight (Qwen3's form). */
  readonly norm: { readonly weight: Readable; readonly eps: number } | undefined;
}

/** RoPE of `heads` consecutive heads from `src` at `offset` into `dst`, each normed first where `rope.norm` says. */
function rotateHeads(src: FloatAccess, dst: FloatAccess, offset: number, heads: number, rope: HeadRope): void {
  const { D, R, style, cs, norm } = rope;
  const x = headScratch(D);
  for (let h = 0; h < heads; h++) {
    const o = offset + h * D;
    for (let i = 0; i < D; i++) x[i] = src.get(o + i);
    if (norm) rmsNormInPlace(x, D, norm.weight, 0, norm.eps);
    rotateInPlace(x, cs, 0, R, style);
    for (let i = 0; i < D; i++) dst.set(o + i, x[i]!);
  }
}
