import type { Fp8DType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { MlaPoolFusedChecked, OwnedTensor } from '@kvkit/contracts/backend';
import { quantizeToFp8, ropeAngles, writeCosSinRow } from '@kvkit/contracts/backend';
import { rotateInPlace } from '../math/rope.js';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import type { FloatAccess } from '../runtime/floatAccess.js';
import { scatterOrder } from '../runtime/scatterOrder.js';
import { cosSinScratch, headScratch } from '../runtime/scratch.js';

/**
 * mlaPoolFused in f64: per token, the latent row [c_kv · inv · w, rope(k_pe)]
 * (inv = 1 / sqrt(mean(c_kv²) + eps)) rounded once to kvLatent's dtype and
 * written at its slot (fp8: the code of that value / scale), and each query
 * head's last R values rotated with the same angles, the others copied.
 * With one head, both layouts put slot s at row s of C + R values.
 */
export function mlaPoolFused(backend: CpuKernels, args: MlaPoolFusedChecked): { qRot?: OwnedTensor } {
  const { N, C, R } = args.dims;
  const W = C + R;
  const latent = backend.floats(args.kvLatent);
  const dtype = backend.own(args.kvLatent).dtype;
  const weight = backend.floats(args.kvNormWeight);
  const positions = backend.own(args.positions).data;
  const angles = ropeAngles({ ropeBase: args.ropeBase, rotaryDim: R, ropeScaling: args.ropeScaling, angles: args.angles });
  const cs = cosSinScratch(R);
  const x = headScratch(Math.max(W, args.dims.Dq ?? 0));

  // The rows as the pool holds them before fp8: kvLatent's dtype, rounded once.
  const rowsStore = backend.storage(dtype, N * W);
  const rows = floatAccess(dtype, rowsStore);
  for (let n = 0; n < N; n++) {
    for (let i = 0; i < W; i++) x[i] = latent.get(n * W + i);
    let sumSquares = 0;
    for (let i = 0; i < C; i++) sumSquares += x[i]! * x[i]!;
    const inv = 1 / Math.sqrt(sumSquares / C + args.eps);
    for (let i = 0; i < C; i++) x[i] = x[i]! * inv * weight.get(i);
    writeCosSinRow(cs, 0, indexAt(positions, n), angles);
    rotateInPlace(x.subarray(C, W), cs, 0, R, args.ropeStyle);
    for (let i = 0; i < W; i++) rows.set(n * W + i, x[i]!);
  }
  storeLatentRows(backend, args, rows, N, W);

  if (!args.q) return {};
  const { Hq, Dq } = args.dims as { Hq: number; Dq: number };
  const q = backend.floats(args.q);
  const qRot = backend.allocate(dtype, [N, Hq, Dq]);
  const out = floatAccess(dtype, qRot.data);
  const nope = Dq - R;
  for (let n = 0; n < N; n++) {
    writeCosSinRow(cs, 0, indexAt(positions, n), angles);
    for (let h = 0; h < Hq; h++) {
      const at = (n * Hq + h) * Dq;
      // The first Dq - R values are copied bit for bit.
      for (let i = 0; i < nope; i++) out.bits[at + i] = q.bits[at + i]!;
      for (let i = 0; i < R; i++) x[i] = q.get(at + nope + i);
      rotateInPlace(x, cs, 0, R, args.ropeStyle);
      for (let i = 0; i < R; i++) out.set(at + nope + i, x[i]!);
    }
  }
  return { qRot };
}

/** The rows into the pool at the slots, the last token of a shared slot last: bits as they are, or fp8 codes of value / scale. */
function storeLatentRows(backend: CpuKernels, args: MlaPoolFusedChecked, rows: FloatAccess, N: number, W: number): void {
  const pool = backend.own(args.pool);
  const slots = backend.own(args.slots).data;
  const fp8 = isFp8(pool.dtype) ? (pool.dtype as Fp8DType) : undefined;
  const scale = fp8 ? (backend.own(args.scale!).data as Float32Array)[0]! : 1;
  const dst = fp8 ? undefined : floatAccess(pool.dtype, pool.data).bits;
  const codes = pool.data as Uint8Array;
  for (const n of scatterOrder(N, args.duplicates.slots)) {
    const slot = indexAt(slots, n);
    if (slot < 0) continue;
    const to = slot * W;
    if (dst) for (let i = 0; i < W; i++) dst[to + i] = rows.bits[n * W + i]!;
    else for (let i = 0; i < W; i++) codes[to + i] = quantizeToFp8(fp8!, rows.get(n * W + i), scale);
  }
}
