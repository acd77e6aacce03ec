import type { IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import type { CopySlotsChecked } from '@kvkit/contracts/backend';
import type { BufferRange } from '../runtime/gpuRuntime.js';
import type { GpuTensor } from '../runtime/gpuTensor.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { copySlotsShader, storedBytesOf } from '../shaders/copySlots.wgsl.js';
import type { CopySlotsPlan } from '../shaders/copySlots.wgsl.js';
import { planCopySlots } from '../shaders/pagedPlan.js';
import { placeWords } from './pagedAttention.js';

/** One side of a copy dispatch: its pools, their layout, dtype and page size. */
interface Side {
  readonly k: BufferRange;
  readonly v: BufferRange;
  readonly layout: 'NHD' | 'HND';
  readonly dtype: PoolDType;
  readonly pageSize: number;
}

/**
 * copySlots: the value rules checked on the device, the ownership pass over
 * the destination slots (the last pair naming a slot writes it), the fp8
 * scales packed into one binding, then one dispatch over the destination's
 * words. Where source and destination share a buffer, the pairs' source rows
 * are staged first ([M, H, D] pools of the source dtype, bits kept), so every
 * row is read as it was before the call and only M rows are copied twice.
 */
export function copySlots(k: WebGpuKernels, args: CopySlotsChecked): void {
  const op = 'copySlots';
  const { M, H, D, S, dstS } = args.dims;
  const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims);
  if (M === 0 || H === 0 || D === 0) return;
  const [kSrc, vSrc, kDst, vDst] = [k.own(args.kSrc), k.own(args.vSrc), k.own(args.kDst), k.own(args.vDst)];
  const fromSlots = k.own(args.fromSlots);
  const toSlots = k.own(args.toSlots);
  // A pair skipped by its source slot claims nothing: the last pair not skipped writes its destination.
  const owned = k.slotOwners.resolve(toSlots, M, dstS, args.duplicates.toSlots, op, fromSlots);

  let words = 0;
  const placed: [GpuTensor, number][] = [];
  const place = (t: GpuTensor | undefined) => {
    const at = words;
    if (t) {
      placed.push([t, at]);
      words += t.numel;
    }
    return { at, perHead: t !== undefined && t.numel > 1 };
  };
  const srcScales = isFp8(kSrc.dtype) ? [place(k.own(args.kSrcScale!)), place(k.own(args.vSrcScale!))] : [place(undefined), place(undefined)];
  const dstScales = isFp8(kDst.dtype) ? [place(k.own(args.kDstScale!)), place(k.own(args.vDstScale!))] : [place(undefined), place(undefined)];
  const scaleStorage = k.scratch('copy slots scales', Math.max(4, words * 4));
  for (const [t, at] of placed) placeWords(k, t, scaleStorage, at);
  const scales = scaleStorage.range(0, Math.max(4, words * 4));
  const fromIndex = fromSlots.dtype as IndexDType;

  const run = (src: Side, dst: Side, staging: CopySlotsPlan['staging'], dstScaleWords: typeof dstScales, to: BufferRange, toType: IndexDType, below: { from: number; to: number }) => {
    const plan = planCopySlots(k.runtime.caps, { srcType: src.dtype, dstType: dst.dtype, srcLayout: src.layout, dstLayout: dst.layout, fromType: fromIndex, toType, staging }, D);
    const kernel = k.runtime.kernel(plan, () => copySlotsShader(plan));
    const unitsPerRow = plan.wholeWords ? (D * storedBytesOf(dst.dtype)) / 4 : D;
    const units = M * 2 * H * unitsPerRow;
    const bit = (on: boolean, b: number) => (on ? b : 0);
    k.runtime.dispatch(
      kernel,
      { kSrc: src.k, vSrc: src.v, fromSlots: fromSlots.range, toSlots: to, scales, kDst: dst.k, vDst: dst.v, flags },
      {
        units,
        unitsPerRow,
        heads: H,
        headDim: D,
        fromBelow: below.from,
        toBelow: below.to,
        srcPageSize: src.pageSize,
        dstPageSize: dst.pageSize,
        kSrcScaleAt: srcScales[0]!.at,
        vSrcScaleAt: srcScales[1]!.at,
        kDstScaleAt: dstScaleWords[0]!.at,
        vDstScaleAt: dstScaleWords[1]!.at,
        scalesPerHead: bit(srcScales[0]!.perHead, 1) | bit(srcScales[1]!.perHead, 2) | bit(dstScaleWords[0]!.perHead, 4) | bit(dstScaleWords[1]!.perHead, 8),
        callFlag: call,
      },
      Math.ceil(units / plan.workgroupSize),
    );
  };

  const source: Side = { k: kSrc.range, v: vSrc.range, layout: args.srcLayout, dtype: kSrc.dtype as PoolDType, pageSize: args.srcLayout === 'HND' ? args.dims.pageSize! : S };
  const destination: Side = { k: kDst.range, v: vDst.range, layout: args.dstLayout, dtype: kDst.dtype as PoolDType, pageSize: args.dstLayout === 'HND' ? args.dims.dstPageSize! : dstS };
  const sources = new Set([kSrc.storage.buffer, vSrc.storage.buffer]);
  if (!sources.has(kDst.storage.buffer) && !sources.has(vDst.storage.buffer)) {
    run(source, destination, 'none', dstScales, owned, toSlots.dtype as IndexDType, { from: S, to: dstS });
    return;
  }
  const rowsBytes = Math.ceil((M * H * D * storedBytesOf(source.dtype)) / 4) * 4;
  const staged = (name: string) => k.scratch(`copy slots staging ${name}`, rowsBytes).range(0, rowsBytes);
  const rows: Side = { k: staged('k'), v: staged('v'), layout: 'NHD', dtype: source.dtype, pageSize: M };
  // Row m of the staging pools takes pair m's source rows, bits kept (the source's scales on both sides).
  run(source, rows, 'stage', srcScales, fromSlots.range, fromIndex, { from: S, to: 0xffffffff });
  run(rows, destination, 'staged', dstScales, owned, toSlots.dtype as IndexDType, { from: S, to: dstS });
}
