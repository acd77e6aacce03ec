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

/**
 * fillLaneAngles' sincos path with a position per pair: each element of the
 * lane's vectors takes the angle of its pair's stream. The sign of the
 * rotation is folded into sin as LaneAngles expects.
 */
template <int VEC, int NV>
__device__ __forceinline__ void fillStreamLaneAngles(const LaneAngles<VEC, NV>& a, bool valid, const PositionStreams& streams, long long token, int lane, int lanes, int R, bool gptj, const float* ropeFrequencies) {
  const int halfR = R >> 1;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
#pragma unroll 1
    for (int u = 0; u < VEC; u++) {
      const int e = first + u;
      float c = 1.0f, s = 0.0f;
      if (valid && e < R) {
        const bool firstOfPair = gptj ? (e & 1) == 0 : e < halfR;
        const int j = gptj ? e >> 1 : firstOfPair ? e : e - halfR;
        sincosf(static_cast<float>(streams.at(token, j)) * ropeFrequencies[j], &s, &c);
        if (firstOfPair) s = -s;
      }
      a.storeOne(k, u, c, s);
    }
  }
}

}  // namespace kvkit
