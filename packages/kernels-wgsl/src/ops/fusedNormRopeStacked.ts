import type { FloatDType, IndexDType } from '@kvkit/contracts';
import type { FusedNormRopeStackedChecked } from '@kvkit/contracts/backend';
import { bytesPerElement } from '../runtime/gpuTensor.js';
import type { WebGpuKernels } from '../runtime/webGpuKernels.js';
import { launchNormRope } from './launch.js';

/** SEMANTICS §1: one dispatch over every (token, layer, head); positions and eps are checked on the device. */
export function fusedNormRopeStacked(k: WebGpuKernels, args: FusedNormRopeStackedChecked) {
  const { T, L, H, D, R, P } = args.dims;
  const kv = k.own(args.kv);
  const dtype = kv.dtype as FloatDType;
  // Every element of made outputs is written below (a rejected call's hold nothing defined), so recycled buffers serve:
  // a fresh one would cost an allocation and Dawn's zero-fill on every call.
  const kOut = args.kOut ? k.own(args.kOut) : k.allocateOverwritten(dtype, [L, T, H, D], 'fusedNormRopeStacked');
  const vOut = args.vOut ? k.own(args.vOut) : k.allocateOverwritten(dtype, [L, T, H, D], 'fusedNormRopeStacked');
  if (T === 0) return { kOut, vOut };
  try {
    const positions = k.own(args.positions);
    const { flags, call } = k.checks.reserve(args.deviceChecks, args.dims);
    launchNormRope(
      k,
      {
        kvType: dtype,
        weightType: args.kNormWeight.dtype as FloatDType,
        cacheType: args.cosSinCache.dtype as FloatDType,
        positionType: positions.dtype as IndexDType,
        slotType: undefined,
        D,
        R,
        style: args.ropeStyle,
        ropeSource: 'cache',
        epsInWeights: false,
      },
      {
        kv: kv.range,
        weights: k.own(args.kNormWeight).range,
        eps: k.own(args.eps).range,
        cosSin: k.own(args.cosSinCache).range,
        positions: positions.range,
        kDst: kOut.range,
        vDst: vOut.range,
        flags,
      },
      { tokens: T, layers: L, heads: H, positionBelow: P, slotBelow: 0, destLayerBytes: T * H * D * bytesPerElement(dtype), callFlag: call, epsWordOffset: 0, mropeSection: args.mropeSection, mropeInterleaved: args.mropeInterleaved },
    );
  } catch (e) {
    // A kernel that failed to build (KV055) throws here: outputs made for this call go with it.
    if (!args.kOut) kOut.dispose();
    if (!args.vOut) vOut.dispose();
    throw e;
  }
  return { kOut, vOut };
}
