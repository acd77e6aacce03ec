import { ownerParams } from '../runtime/slotOwners.js';
import type { FloatDType, PoolDType } from '@kvkit/contracts';
import type { CopySlotsChecked } from '@kvkit/contracts/backend';
import { FLOAT_CODE, LAUNCHES } from '../generated/kernels.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { deviceRules } from './normRope.js';

/** The pool dtype codes of CopySlotsParams: a FloatCode, or 3 and 4 for the fp8 formats. */
function dtypeCode(dtype: PoolDType): number {
  return dtype === 'fp8e4m3' ? 3 : dtype === 'fp8e5m2' ? 4 : FLOAT_CODE[dtype as FloatDType];
}

/** Whether two byte ranges [start, start + bytes) of device memory meet. */
function overlaps(a: { readonly at: number; readonly bytes: number }, b: { readonly at: number; readonly bytes: number }): boolean {
  return a.bytes > 0 && b.bytes > 0 && a.at < b.at + b.bytes && b.at < a.at + a.bytes;
}

/** Blocks of 8 warps for a warp-per-pair kernel: enough for every pair, no more than the device keeps busy. */
function pairBlocks(kernels: CudaKernels, pairs: number, threads: number): number {
  return Math.max(1, Math.min(Math.ceil(pairs / (threads / 32)), kernels.cx.multiprocessors * 16));
}

/**
 * copySlots on the device: the value rules (slots, fp8 scales) checked first, then, where source and
 * destination share storage, every pair's source rows staged ([M, 2, H, D] of the source dtype, bits kept);
 * then the claims (of the pairs naming one destination that are not skipped, the last), then a warp per pair
 * writes the rows its pair owns: 16-byte moves where the bits stay and rows are aligned, else element by
 * element, decoded and rounded once into the destination's dtype.
 */
export function copySlots(kernels: CudaKernels, args: CopySlotsChecked): void {
  const op = 'copySlots';
  const { M, H, D, S, dstS } = args.dims;
  const cx = kernels.cx;
  cx.makeCurrent();
  const kSrc = kernels.own(args.kSrc);
  const vSrc = kernels.own(args.vSrc);
  const kDst = kernels.own(args.kDst);
  const vDst = kernels.own(args.vDst);
  const fromSlots = kernels.own(args.fromSlots);
  const toSlots = kernels.own(args.toSlots);
  const scaleArgs = [args.kSrcScale, args.vSrcScale, args.kDstScale, args.vDstScale].map((s) => (s ? kernels.own(s) : undefined));
  const present = scaleArgs.filter((s) => s !== undefined);
  // The kernels read by index: source views are copied contiguous first (the destinations are contiguous by the contract).
  const gathered = kernels.gather.contiguous([kSrc, vSrc, fromSlots, toSlots, ...present], op);
  const [kSrcAt, vSrcAt, fromAt, toAt] = gathered as [number, number, number, number];
  let next = 4;
  const scaleAt = scaleArgs.map((s) => (s ? gathered[next++]! : 0));
  const [kSrcScale, vSrcScale, kDstScale, vDstScale] = scaleAt as [number, number, number, number];
  deviceRules(kernels, args.deviceChecks, args.dims, { fromSlots: fromAt, toSlots: toAt, kSrcScale, vSrcScale, kDstScale, vDstScale });
  const call = kernels.badValues.checkCall(op);
  if (M === 0) return;

  const srcType = kSrc.dtype as PoolDType;
  const dstType = kDst.dtype as PoolDType;
  const sources = [{ at: kSrcAt, bytes: kSrc.byteLength }, { at: vSrcAt, bytes: vSrc.byteLength }];
  const destinations = [{ at: kDst.ptr, bytes: kDst.byteLength }, { at: vDst.ptr, bytes: vDst.byteLength }];
  const staged = sources.some((s) => destinations.some((d) => overlaps(s, d)));
  const srcBytes = ELEMENT_BYTES[srcType];
  const staging = staged ? kernels.copyStaging.take(M * 2 * H * D * srcBytes, op).ptr : 0;
  const claims = kernels.slotOwners.reserve(M, op);
  // 16-byte moves: one dtype on both sides (rows that keep their bits), and every row start aligned.
  const vectors = srcType === dstType && (D * srcBytes) % 16 === 0 && [kSrcAt, vSrcAt, kDst.ptr, vDst.ptr, staging].every((a) => a % 16 === 0);
  const perHead = (i: number) => (scaleArgs[i] && scaleArgs[i]!.shape[0]! > 1 ? 1 << i : 0);
  const p = kernels.params.copySlots;
  p.write({
    kSrc: kSrcAt,
    vSrc: vSrcAt,
    kDst: kDst.ptr,
    vDst: vDst.ptr,
    kSrcScale,
    vSrcScale,
    kDstScale,
    vDstScale,
    scalesPerHead: perHead(0) | perHead(1) | perHead(2) | perHead(3),
    fromSlots: fromAt,
    toSlots: toAt,
    slotsAreI64: (fromSlots.dtype === 'i64' ? 1 : 0) | (toSlots.dtype === 'i64' ? 2 : 0),
    staging,
    ...ownerParams(claims),
    badValue: kernels.badValues.record.ptr,
    call,
    numPairs: M,
    numKvHeads: H,
    headDim: D,
    srcHeadMajor: args.srcLayout === 'HND' ? 1 : 0,
    srcPageSize: args.srcLayout === 'HND' ? args.dims.pageSize! : 0,
    srcDType: dtypeCode(srcType),
    srcSlotBelow: S,
    dstHeadMajor: args.dstLayout === 'HND' ? 1 : 0,
    dstPageSize: args.dstLayout === 'HND' ? args.dims.dstPageSize! : 0,
    dstDType: dtypeCode(dstType),
    dstSlotBelow: dstS,
    vectors: vectors ? 1 : 0,
  });
  // Each waits for the grid ahead (the check, then the previous step) before it touches memory.
  if (staged) cx.launchOverlapping('copy_slots_stage', p, pairBlocks(kernels, M, LAUNCHES.copySlots.stage.threads), LAUNCHES.copySlots.stage.threads, 0, op);
  if (claims.table !== 0) cx.launchOverlapping('copy_slots_claim', p, Math.ceil(M / LAUNCHES.copySlots.claim.threads), LAUNCHES.copySlots.claim.threads, 0, op);
  cx.launchOverlapping('copy_slots', p, pairBlocks(kernels, M, LAUNCHES.copySlots.default.threads), LAUNCHES.copySlots.default.threads, 0, op);
}
