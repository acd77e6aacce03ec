import { attentionScale } from '@kvkit/contracts/backend';
import type { PagedAttentionChecked } from '@kvkit/contracts/backend';
import type { CpuKernels } from '../runtime/cpuKernels.js';
import { floatAccess, indexAt } from '../runtime/floatAccess.js';
import { poolRowReader, poolTarget } from './poolStore.js';

/**
 * pagedAttention in f64, two passes per query head: the logits (scaled, then
 * capped) of the tokens the query sees, their maximum, then
 * lse = max + ln Σ exp(logit - max) and out = Σ exp(logit - lse) · v, rounded
 * once to q's dtype (lse to f32). Each request's K and V rows are read once
 * per KV head and shared by its Hq / H query heads.
 */
export function pagedAttention(backend: CpuKernels, args: PagedAttentionChecked) {
  const { N, Hq, H, D, Dv, B1 } = args.dims;
  const out = args.out ? backend.own(args.out) : backend.allocate(args.q.dtype, [N, Hq, Dv]);
  const lse = backend.allocate('f32', [N, Hq]);
  if (N === 0) return { out, lse };
  const group = Hq / H;
  const scale = attentionScale(args.scale, D);
  const cap = args.logitSoftcap;
  const window = args.slidingWindow;
  const readK = poolRowReader(poolTarget(backend, args.kPool, args.kScale, args.layout, args.dims));
  const readV = poolRowReader(poolTarget(backend, args.vPool, args.vScale, args.layout, args.dims));
  const q = backend.floats(args.q);
  const o = floatAccess(out.dtype, out.data);
  const lseOut = lse.data as Float32Array;
  const qIndptr = backend.own(args.qIndptr).data;
  const kvIndptr = backend.own(args.kvIndptr).data;
  const kvSlots = backend.own(args.kvSlots).data;
  const qRow = new Float64Array(D);
  const acc = new Float64Array(Dv);
  for (let b = 0; b + 1 < B1; b++) {
    const qStart = indexAt(qIndptr, b);
    const qLen = indexAt(qIndptr, b + 1) - qStart;
    const kvStart = indexAt(kvIndptr, b);
    const kvLen = indexAt(kvIndptr, b + 1) - kvStart;
    if (qLen === 0) continue;
    const keys = new Float64Array(kvLen * D);
    const vals = new Float64Array(kvLen * D);
    const logits = new Float64Array(kvLen);
    for (let h = 0; h < H; h++) {
      for (let j = 0; j < kvLen; j++) {
        const slot = indexAt(kvSlots, kvStart + j);
        readK(slot, h, keys, j * D);
        readV(slot, h, vals, j * D);
      }
      for (let i = 0; i < qLen; i++) {
        // The contract keeps qLen <= kvLen, so position p is a cached token and every query sees at least itself.
        const p = kvLen - qLen + i;
        const last = args.causal ? p : kvLen - 1;
        const first = window === undefined ? 0 : Math.max(0, p - window + 1);
        const n = qStart + i;
        for (let g = 0; g < group; g++) {
          const hq = h * group + g;
          const qAt = (n * Hq + hq) * D;
          const outAt = (n * Hq + hq) * Dv;
          for (let d = 0; d < D; d++) qRow[d] = q.get(qAt + d);
          let max = -Infinity;
          for (let j = first; j <= last; j++) {
            let dot = 0;
            for (let d = 0; d < D; d++) dot += qRow[d]! * keys[j * D + d]!;
            let logit = scale * dot;
            if (cap !== undefined) logit = cap * Math.tanh(logit / cap);
            logits[j] = logit;
            if (logit > max) max = logit;
          }
          let sum = 0;
          for (let j = first; j <= last; j++) sum += Math.exp(logits[j]! - max);
          const total = max + Math.log(sum);
          acc.fill(0);
          for (let j = first; j <= last; j++) {
            const w = Math.exp(logits[j]! - total);
            // V is the first Dv values of each row (MLA: the latent part of the latent row).
            for (let d = 0; d < Dv; d++) acc[d]! += w * vals[j * D + d]!;
          }
          for (let d = 0; d < Dv; d++) o.set(outAt + d, acc[d]!);
          lseOut[n * Hq + hq] = total;
        }
      }
    }
  }
  return { out, lse };
}
