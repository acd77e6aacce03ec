import { attentionScale } from '@kvkit/contracts/backend';
import type { FloatDType, IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { OwnedTensor, PagedAttentionChecked } from '@kvkit/contracts/backend';
import type { DeviceStorage } from '../runtime/gpuRuntime.js';
import type { GpuTensor } from '../runtime/gpuTensor.js';
import { copyStrided } from '../runtime/views.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { pagedAttentionMergeShader, pagedAttentionShader } from '../shaders/pagedAttention.wgsl.js';
import { pagedPassSlots, pagedSplit, planPagedAttention, planPagedAttentionMerge } from '../shaders/pagedPlan.js';
import type { PagedAttentionRequest } from '../shaders/pagedPlan.js';

/** GPUBufferUsage.COPY_SRC. */
const USAGE_COPY_SRC = 0x4;

/** Words a tensor of 32-bit or 64-bit entries takes. */
const wordsOf = (t: GpuTensor) => t.byteLength / 4;

/** A contiguous tensor's words into `into` from word `at`: a buffer copy, or the strided copy kernel where the application's buffer lacks COPY_SRC. */
export function placeWords(k: WebGpuKernels, t: GpuTensor, into: DeviceStorage, at: number): void {
  if (t.numel === 0) return;
  if ((t.storage.buffer.usage & USAGE_COPY_SRC) !== 0) k.runtime.copy(t.storage.buffer, t.byteOffset, into.buffer, at * 4, t.byteLength);
  else copyStrided(k, t, into.range(0, into.byteLength), t.dtype === 'i64' ? at / 2 : at);
}

/**
 * pagedAttention: the call's value and offsets rules checked on the device,
 * the index tensors and fp8 scales packed into one binding, then one
 * dispatch over (piece, KV head) and, where some request may be split, the
 * merge over (query, query head).
 */
export function pagedAttention(k: WebGpuKernels, args: PagedAttentionChecked): { out: OwnedTensor; lse: OwnedTensor } {
  const op = 'pagedAttention';
  const { N, Hq, H, D, Dv, S, B1, C } = args.dims;
  const B = B1 - 1;
  const q = k.own(args.q);
  const out = args.out ? k.own(args.out) : k.allocateOverwritten(q.dtype, [N, Hq, Dv], op);
  const lse = k.allocateOverwritten('f32', [N, Hq], op);
  const kvSlotsRule = args.deviceChecks.findIndex((r) => r.arg === 'kvSlots');
  const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims, {
    checks: args.deviceSegmentChecks,
    after: kvSlotsRule < 0 ? args.deviceChecks.length : kvSlotsRule,
    entries: B1,
    qTotal: N,
    kvTotal: C,
  });
  if (N === 0) return { out, lse };

  const qIndptr = k.own(args.qIndptr);
  const kvIndptr = k.own(args.kvIndptr);
  const kvSlots = k.own(args.kvSlots);
  const kPool = k.own(args.kPool);
  const vPool = k.own(args.vPool);
  const fp8 = isFp8(kPool.dtype);
  const kScale = fp8 ? k.own(args.kScale!) : undefined;
  const vScale = fp8 ? k.own(args.vScale!) : undefined;

  // Sections start on even words, so an i64 tensor placed by the copy kernel lands on whole entries.
  const even = (n: number) => n + (n % 2);
  const qIndptrAt = 0;
  const kvIndptrAt = even(qIndptrAt + wordsOf(qIndptr));
  const kvSlotsAt = even(kvIndptrAt + wordsOf(kvIndptr));
  const kScaleAt = even(kvSlotsAt + wordsOf(kvSlots));
  const vScaleAt = kScaleAt + (kScale?.numel ?? 0);
  const words = vScaleAt + (vScale?.numel ?? 0);
  const indices = k.scratch('paged attention indices', words * 4);
  placeWords(k, qIndptr, indices, qIndptrAt);
  placeWords(k, kvIndptr, indices, kvIndptrAt);
  placeWords(k, kvSlots, indices, kvSlotsAt);
  if (kScale && vScale) {
    placeWords(k, kScale, indices, kScaleAt);
    placeWords(k, vScale, indices, vScaleAt);
  }

  const request: PagedAttentionRequest = {
    qType: q.dtype as FloatDType,
    poolType: kPool.dtype as PoolDType,
    layout: args.layout,
    headDim: D,
    valueDim: Dv,
    qIndptrType: qIndptr.dtype as IndexDType,
    kvIndptrType: kvIndptr.dtype as IndexDType,
    slotType: kvSlots.dtype as IndexDType,
  };
  const split = pagedSplit({ N, Hq, H, D, Dv, C, B }, k.runtime.maxBufferBytes);
  const partialBytes = Math.max(4, split.partialFloats * 4);
  const partial = k.scratch('paged attention partial', partialBytes).range(0, partialBytes);
  const partialLseAt = split.pieces * split.splitQueries * Hq * Dv;
  const indexRange = indices.range(0, Math.max(4, words * 4));

  const rowsPerRequest = (N / Math.max(B, 1)) * (Hq / H);
  const plan = planPagedAttention(k.runtime.caps, request, rowsPerRequest);
  const passSlots = pagedPassSlots(rowsPerRequest, plan.rowsPerPass);
  const kernel = k.runtime.kernel(plan, () => pagedAttentionShader(plan));
  k.runtime.dispatch(
    kernel,
    { q: q.range, kPool: kPool.range, vPool: vPool.range, indices: indexRange, out: out.range, lse: lse.range, partial, flags },
    {
      tokens: N,
      requests: B,
      queryHeads: Hq,
      kvHeads: H,
      slotBelow: S,
      pageSize: args.layout === 'HND' ? args.dims.pageSize! : S,
      qIndptrAt,
      kvIndptrAt,
      kvSlotsAt,
      kScaleAt,
      kScaleStep: kScale && kScale.numel > 1 ? 1 : 0,
      vScaleAt,
      vScaleStep: vScale && vScale.numel > 1 ? 1 : 0,
      causal: args.causal ? 1 : 0,
      slidingWindow: args.slidingWindow ?? 0,
      scale: attentionScale(args.scale, D),
      logitSoftcap: args.logitSoftcap ?? 0,
      tokensPerSplit: split.tokensPerSplit,
      splitQueries: split.splitQueries,
      pieces: split.pieces,
      partialLseAt,
      passSlots,
      callFlag: call,
    },
    split.pieces * H * passSlots,
  );
  const mergePlan = planPagedAttentionMerge(k.runtime.caps, request);
  if (split.partialFloats === 0) {
    // prepare builds the merge as well: a later call over more cached tokens is split and needs it.
    if (k.runtime.dryRun) k.runtime.kernel(mergePlan, () => pagedAttentionMergeShader(mergePlan));
    return { out, lse };
  }
  const merge = k.runtime.kernel(mergePlan, () => pagedAttentionMergeShader(mergePlan));
  k.runtime.dispatch(
    merge,
    { partial, indices: indexRange, out: out.range, lse: lse.range, flags },
    { tokens: N, requests: B, queryHeads: Hq, qIndptrAt, kvIndptrAt, tokensPerSplit: split.tokensPerSplit, splitQueries: split.splitQueries, pieces: split.pieces, partialLseAt, callFlag: call },
    N * Hq,
  );
  return { out, lse };
}
