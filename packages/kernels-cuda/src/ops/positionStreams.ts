import { mropeLayout } from '@kvkit/contracts/backend';

/** mRoPE's streams as the kernels take them (mrope.cuh PositionStreams); one stream without mropeSection. */
export function streamParams(args: { readonly mropeSection?: readonly number[] | undefined; readonly mropeInterleaved?: boolean }, tokens: number, R: number) {
  if (!args.mropeSection) return { positionStreamStride: 0, mropeTemporalPairs: R / 2, mropeHeightPairsEnd: R / 2, mropeInterleaved: 0 };
  const { interleaved, ends } = mropeLayout(args.mropeSection, args.mropeInterleaved);
  return { positionStreamStride: tokens, mropeTemporalPairs: ends[0], mropeHeightPairsEnd: ends[1], mropeInterleaved: interleaved ? 1 : 0 };
}
