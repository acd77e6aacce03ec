import { mropeBounds } from '@kvkit/contracts/backend';

/** mRoPE's streams as the kernels take them (mrope.cuh PositionStreams); one stream without mropeSection. */
export function streamParams(args: { readonly mropeSection?: readonly number[] | undefined }, tokens: number, R: number) {
  if (!args.mropeSection) return { positionStreamStride: 0, mropeTemporalPairs: R / 2, mropeHeightPairsEnd: R / 2 };
  const [temporalPairs, heightPairsEnd] = mropeBounds(args.mropeSection);
  return { positionStreamStride: tokens, mropeTemporalPairs: temporalPairs, mropeHeightPairsEnd: heightPairsEnd };
}
