import type { FloatDType } from '@kvkit/contracts';
import type { FusedNormRopeStackedChecked } from '@kvkit/contracts/backend';
import { contiguousStrides } from '@kvkit/contracts/backend';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import type { CudaTensor } from '../runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';
import { aligned } from '../runtime/gatherStrided.js';
import { boundsOf, deviceRules, launchNormRope, tokenMajorLayout } from './normRope.js';

/** SEMANTICS.md §1 on the device: outputs allocated (or the caller's), one launch (kv read through its strides, or copied where its rows are not contiguous and aligned) behind the check of positions and eps, returns at once. */
export function fusedNormRopeStacked(kernels: CudaKernels, args: FusedNormRopeStackedChecked): { kOut: CudaTensor; vOut: CudaTensor } {
  const op = 'fusedNormRopeStacked';
  const { T, L, H, D, R, P } = args.dims;
  const kv = kernels.own(args.kv);
  const dtype = kv.dtype as FloatDType;
  const es = ELEMENT_BYTES[dtype];
  const kOut = args.kOut ? kernels.own(args.kOut) : kernels.allocate(dtype, [L, T, H, D], op);
  const vOut = args.vOut ? kernels.own(args.vOut) : kernels.allocate(dtype, [L, T, H, D], op);
  if (T === 0) return { kOut, vOut };
  kernels.cx.makeCurrent();
  const cache = kernels.own(args.cosSinCache);
  const weight = kernels.own(args.kNormWeight);
  const positions = kernels.own(args.positions);
  const eps = kernels.own(args.eps);
  // kv is read through its strides where its head rows are contiguous and aligned (the vector path reads them so); else
  // it is copied, since the element path's norm sums in another order than its contiguous copy would take. The other
  // inputs are read as contiguous copies where they are views.
  const viewLayout = tokenMajorLayout(kv, H, D);
  const readInPlace = viewLayout.elementStride === 1 && [kv.ptr, viewLayout.tokenStride * es, viewLayout.layerStride * es, viewLayout.vOffset * es].every((a) => a % 16 === 0);
  const [cacheAt, weightAt, positionsAt, epsAt, kvCopy] = kernels.gather.contiguous([cache, weight, positions, eps, ...(readInPlace ? [] : [aligned(kv, 16, true)])], op) as number[];
  const kvLayout = readInPlace ? viewLayout : tokenMajorLayout({ shape: kv.shape, strides: contiguousStrides(kv.shape) }, H, D);
  // Checks are numbered in the contract's order: positions, then eps.
  const positionRule = boundsOf(args.deviceChecks, 'positions', { min: 0, below: P });
  deviceRules(kernels, args.deviceChecks, args.dims, { positions: positionsAt, eps: epsAt });
  launchNormRope(kernels, {
    op,
    dtype,
    T,
    L,
    H,
    D,
    R,
    gptj: args.ropeStyle === 'gptj',
    kv: readInPlace ? kv.ptr : kvCopy!,
    kvLayout,
    kNormWeight: weightAt!,
    weightIsF32: weight.dtype === 'f32' && dtype !== 'f32',
    eps: epsAt!,
    angles: { cache: cacheAt!, cacheDType: cache.dtype as FloatDType },
    positions: positionsAt!,
    positionsAreI64: positions.dtype === 'i64',
    mropeSection: args.mropeSection,
    mropeInterleaved: args.mropeInterleaved,
    positionRule,
    kOut: kOut.ptr,
    vOut: vOut.ptr,
    outLayerStride: T * H * D,
  });
  return { kOut, vOut };
}
