import type { RopePoolFusedChecked } from '@kvkit/contracts/backend';
import { ropeAngles, writeCosSinRow } from '@kvkit/contracts/backend';
import { rotateInPlace } from '../math/rope.js';
import type { RopeStyle } from '../math/rope.js';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { FloatAccess } from '../runtime/floatAccess.js';
import { scatterOrder } from '../runtime/scatterOrder.js';
import { cosSinScratch, headScratch } from '../runtime/scratch.js';

/** SEMANTICS §3: RoPE on q and k (angles from ropeBase and ropeScaling, reduced exactly, in f64), then k and v scattered into the pools. */
export function ropePoolFused(backend: CpuKernels, args: RopePoolFusedChecked) {
  const { N, Hq, H, D, R } = args.dims;
  const q = backend.own(args.q);
  const dtype = q.dtype;
  const qRot = backend.allocate(dtype, [N, Hq, D]);
  const kRot = backend.allocate(dtype, [N, H, D]);
  const positions = backend.own(args.positions).data;
  const angles = ropeAngles({ ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles });
  const cs = cosSinScratch(R);
  const rope = { D, R, style: args.ropeStyle, cs };
  const qIn = floatAccess(dtype, q.data);
  const kIn = backend.floats(args.k);
  const qOut = floatAccess(dtype, qRot.data);
  const kOut = floatAccess(dtype, kRot.data);
  for (let n = 0; n < N; n++) {
    writeCosSinRow(cs, 0, indexAt(positions, n), angles);
    rotateHeads(qIn, qOut, n * Hq * D, Hq, rope);
    rotateHeads(kIn, kOut, n * H * D, H, rope);
  }

  const rowLength = H * D;
  const kPool = backend.floats(args.kPool).bits;
  const vPool = backend.floats(args.vPool).bits;
  const slots = backend.own(args.slots).data;
  // The contract (KV039) keeps q, k and v apart from the pools, so the scatter never reads its own writes.
  const vBits = backend.floats(args.v).bits;
  const kBits = kOut.bits;
  for (const n of scatterOrder(N, args.duplicates.slots)) {
    const slot = indexAt(slots, n);
    if (slot < 0) continue;
    for (let i = 0; i < rowLength; i++) {
      kPool[slot * rowLength + i] = kBits[n * rowLength + i]!;
      vPool[slot * rowLength + i] = vBits[n * rowLength + i]!;
    }
  }
  return { qRot, kRot };
}

/** RoPE of `heads` consecutive heads from `src` at `offset` into `dst`, no norm. */
function rotateHeads(src: FloatAccess, dst: FloatAccess, offset: number, heads: number, rope: { D: number; R: number; style: RopeStyle; cs: Float64Array }): void {
  const { D, R, style, cs } = rope;
  const x = headScratch(D);
  for (let h = 0; h < heads; h++) {
    const o = offset + h * D;
    for (let i = 0; i < D; i++) x[i] = src.get(o + i);
    rotateInPlace(x, cs, 0, R, style);
    for (let i = 0; i < D; i++) dst.set(o + i, x[i]!);
  }
}
