import type { FusedNormRopeStackedChecked } from '@kvkit/contracts/backend';
import { mropeLayout, writeMropeRow } from '@kvkit/contracts/backend';
import { rmsNormInPlace } from '../math/rmsNorm.js';
import type { Readable } from '../math/rmsNorm.js';
import { rotateInPlace } from '../math/rope.js';
import type { RopeStyle } from '../math/rope.js';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import type { Storage } from '../runtime/cpuTensor.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { FloatAccess } from '../runtime/floatAccess.js';
import { scatterOrder } from '../runtime/scatterOrder.js';
import type { SlotScatter } from '../runtime/scatterOrder.js';
import { cosSinScratch, headScratch } from '../runtime/scratch.js';

/** Fills out[0..R) with the cos ‖ sin row of a position. */
export type CosSinRow = (position: number, out: Float64Array) => void;

/** One pass of RMSNorm + RoPE over K and a copy of V, from the stacked kv layout into [L, rows, H, D] outputs. */
export interface NormRopeStackedJob {
  readonly T: number;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: RopeStyle;
  /** [T, L, 2*H*D]: per token and layer, all K heads then all V heads. */
  readonly kv: FloatAccess;
  /** [L, D] */
  readonly kNormWeight: Readable;
  /** [L] */
  readonly eps: Readable;
  /** [T], or [3, T] with mropeSection, i32 or i64; already checked against the cos/sin rows. */
  readonly positions: Storage;
  readonly cosSinRow: CosSinRow;
  /** mRoPE: pair j takes the cos/sin row of its stream's position (stream s of token t at s*T + t). */
  readonly mropeSection?: readonly number[] | undefined;
  /** mRoPE's interleaved layout (Qwen3-VL) of mropeSection. */
  readonly mropeInterleaved?: boolean;
  /** [L, rows, H, D], same dtype as kv. */
  readonly kDst: FloatAccess;
  readonly vDst: FloatAccess;
  readonly rows: number;
  /** Row of each token in the outputs (negative: skip the token); token t goes to row t when absent. */
  readonly slots?: SlotScatter;
}

/** The math of fusedNormRopeStacked (SEMANTICS §1), shared with the materializer. */
export function normRopeStacked(job: NormRopeStackedJob): void {
  const { T, L, H, D, R, kv, kDst, rows } = job;
  const kvBits = kv.bits;
  const vBits = job.vDst.bits;
  const x = headScratch(D);
  const cs = cosSinScratch(R);
  const tokenStride = L * 2 * H * D;
  const bounds = job.mropeSection && mropeLayout(job.mropeSection, job.mropeInterleaved);
  // Dense outputs give each token its own row, so any order does there.
  for (const t of scatterOrder(T, job.slots?.duplicates ?? 'last')) {
    const row = job.slots ? indexAt(job.slots.values, t) : t;
    if (row < 0) continue;
    if (bounds) writeMropeRow(cs, 0, R / 2, bounds, (stream, row) => job.cosSinRow(indexAt(job.positions, stream * T + t), row));
    else job.cosSinRow(indexAt(job.positions, t), cs);
    for (let l = 0; l < L; l++) {
      const eps = job.eps.get(l);
      for (let h = 0; h < H; h++) {
        const k = t * tokenStride + l * 2 * H * D + h * D;
        const v = k + H * D;
        const out = ((l * rows + row) * H + h) * D;
        for (let i = 0; i < D; i++) x[i] = kv.get(k + i);
        rmsNormInPlace(x, D, job.kNormWeight, l * D, eps);
        rotateInPlace(x, cs, 0, R, job.ropeStyle);
        for (let i = 0; i < D; i++) kDst.set(out + i, x[i]!);
        for (let i = 0; i < D; i++) vBits[out + i] = kvBits[v + i]!;
      }
    }
  }
}

export function fusedNormRopeStacked(backend: CpuKernels, args: FusedNormRopeStackedChecked) {
  const { T, L, H, D, R } = args.dims;
  const kv = backend.own(args.kv);
  const kOut = args.kOut ? backend.own(args.kOut) : backend.allocate(kv.dtype, [L, T, H, D]);
  const vOut = args.vOut ? backend.own(args.vOut) : backend.allocate(kv.dtype, [L, T, H, D]);
  if (T === 0) return { kOut, vOut };
  const cache = backend.own(args.cosSinCache);
  const cacheValues = floatAccess(cache.dtype, cache.data);
  normRopeStacked({
    T,
    L,
    H,
    D,
    R,
    ropeStyle: args.ropeStyle,
    kv: floatAccess(kv.dtype, kv.data),
    kNormWeight: backend.floats(args.kNormWeight),
    eps: backend.floats(args.eps),
    positions: backend.own(args.positions).data,
    mropeSection: args.mropeSection,
    mropeInterleaved: args.mropeInterleaved,
    cosSinRow: (p, out) => {
      for (let j = 0; j < R; j++) out[j] = cacheValues.get(p * R + j);
    },
    kDst: floatAccess(kOut.dtype, kOut.data),
    vDst: floatAccess(vOut.dtype, vOut.data),
    rows: T,
  });
  return { kOut, vOut };
}
