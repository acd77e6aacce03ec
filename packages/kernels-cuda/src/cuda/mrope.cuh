// mRoPE (Qwen2-VL): three position streams (temporal, height, width), each feeding a
// contiguous run of rotary pairs; plain RoPE is the case of one stream. Interleaved
// (Qwen3-VL): height takes pairs j % 3 == 1 below 3h, width j % 3 == 2 below 3w,
// temporal the rest (backend/mrope.ts mropeLayout gives the ends).
#pragma once
#include "rope.cuh"
#include "storage.cuh"

namespace kvkit {

// Where a token's position for pair j lives: stream s of token n at s * stride + n.
struct PositionStreams {
  const void* positions;
  long long is64;
  long long stride;  // 0: one stream
  int temporalPairs;   // interleaved: 3 * height, the end of the height stride
  int heightPairsEnd;  // interleaved: 3 * width, the end of the width stride
  bool interleaved;

  __device__ __forceinline__ bool many() const { return stride != 0; }

  __device__ __forceinline__ int streamOf(int j) const {
    if (stride == 0) return 0;
    if (interleaved) {
      const int r = j % 3;
      return r == 1 && j < temporalPairs ? 1 : r == 2 && j < heightPairsEnd ? 2 : 0;
    }
    return j < temporalPairs ? 0 : j < heightPairsEnd ? 1 : 2;
  }

  __device__ __forceinline__ long long at(long long n, int j) const {
    return loadIndex(positions, is64, streamOf(j) * stride + n);
  }
};

// fillLaneAnglesAt with each pair at its stream's position, the angles from the angle table (ropePoolFused).
template <int VEC, int NV>
__device__ __forceinline__ void fillStreamLaneAngles(const LaneAngles<VEC, NV>& a, bool valid, const PositionStreams& streams, long long token, int lane, int lanes, int R, bool gptj, const unsigned* angleTable) {
  fillLaneAnglesAt<VEC, NV>(a, valid, 0, lane, lanes, R, gptj, AngleSource{nullptr, 0, false, angleTable}, true, [&](int j) { return streams.at(token, j); });
}

}  // namespace kvkit
