// mRoPE (Qwen2-VL): three position streams (temporal, height, width), each feeding a
// contiguous run of rotary pairs; plain RoPE is the case of one stream.
#pragma once
#include "rope.cuh"
#include "storage.cuh"

namespace kvkit {

// Where a token's position for pair j lives: stream s of token n at s * stride + n.
struct PositionStreams {
  const void* positions;
  long long is64;
  long long stride;  // 0: one stream
  int temporalPairs;
  int heightPairsEnd;

  __device__ __forceinline__ bool many() const { return stride != 0; }

  __device__ __forceinline__ long long at(long long n, int j) const {
    const int s = stride == 0 ? 0 : j < temporalPairs ? 0 : j < heightPairsEnd ? 1 : 2;
    return loadIndex(positions, is64, s * stride + n);
  }
};

// fillLaneAnglesAt with each pair at its stream's position, the angles from the angle table (ropePoolFused).
template <int VEC, int NV>
__device__ __forceinline__ void fillStreamLaneAngles(const LaneAngles<VEC, NV>& a, bool valid, const PositionStreams& streams, long long token, int lane, int lanes, int R, bool gptj, const unsigned* angleTable) {
  fillLaneAnglesAt<VEC, NV>(a, valid, 0, lane, lanes, R, gptj, AngleSource{nullptr, 0, false, angleTable}, true, [&](int j) { return streams.at(token, j); });
}

}  // namespace kvkit
