// Q/K-norm (Qwen3, Gemma 3): RMSNorm of one head row over D before RoPE, x * inv * w,
// on the values a row's lanes already hold; the sum of squares in f32.
#pragma once
#include "rope.cuh"
#include "storage.cuh"

namespace kvkit {

// 1 / RMS of the row a group of `lanes` lanes holds (vectors lane + k*lanes, zeros past the row); every
// lane of `mask` (the warp, or the row's group) must call it, since the partial sums meet through shuffles.
template <typename S, int NV>
__device__ __forceinline__ float inverseRmsInLanes(const float (&x)[NV][S::kPer16], float eps, int lanes, int D, unsigned mask) {
  float sumSquares = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++)
#pragma unroll
    for (int u = 0; u < S::kPer16; u++) sumSquares = fmaf(x[k][u], x[k][u], sumSquares);
  return rsqrtf(sumOverLanes(sumSquares, lanes, mask) / static_cast<float>(D) + eps);
}

/**
 * Norms the row a group of `lanes` lanes holds when `apply`, the weights
 * read from `weight` (may be null where !apply). Every lane of `mask` must
 * call it (inverseRmsInLanes).
 */
template <typename S, int NV>
__device__ __forceinline__ void normRowInLanes(float (&x)[NV][S::kPer16], bool apply, const void* weight, bool weightIsF32, float eps, int lane, int lanes, int D, unsigned mask = kFullWarp) {
  constexpr int VEC = S::kPer16;
  const float inv = inverseRmsInLanes<S, NV>(x, eps, lanes, D, mask);
  if (!apply) return;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
    if (first >= D) continue;
    float w[VEC];
    loadWeights<S>(weight, first, weightIsF32, w);
#pragma unroll
    for (int u = 0; u < VEC; u++) x[k][u] = x[k][u] * inv * w[u];
  }
}

// The same for rows of one vector a lane, the lane's weights in shared memory as f32 (w: its VEC weights, 16-byte aligned).
template <typename S>
__device__ __forceinline__ void normVectorInLanes(float (&x)[1][S::kPer16], bool apply, const float* w, float eps, int lanes, int D, unsigned mask = kFullWarp) {
  const float inv = inverseRmsInLanes<S, 1>(x, eps, lanes, D, mask);
  if (!apply) return;
#pragma unroll
  for (int part = 0; part < S::kPer16 / 4; part++) {
    const float4 four = reinterpret_cast<const float4*>(w)[part];
    const float wf[4] = {four.x, four.y, four.z, four.w};
#pragma unroll
    for (int u = 0; u < 4; u++) x[0][4 * part + u] = x[0][4 * part + u] * inv * wf[u];
  }
}

// A weight of either dtype the norm takes (the row's S, or f32).
template <typename S>
__device__ __forceinline__ float normWeightAt(const void* weight, bool weightIsF32, long long i) {
  return weightIsF32 ? loadElement<F32>(weight, i) : loadElement<S>(weight, i);
}

// 1 / RMS of a row read element by element (`element` apart: a view's row) by one whole warp (the any-shape path).
template <typename S>
__device__ __forceinline__ float rowInverseRms(const void* src, long long rowFirst, long long element, long long D, float eps, int lane) {
  float sumSquares = 0.0f;
  for (long long e = lane; e < D; e += 32) {
    const float x = loadElement<S>(src, rowFirst + e * element);
    sumSquares = fmaf(x, x, sumSquares);
  }
  return rsqrtf(sumOverLanes(sumSquares, 32) / static_cast<float>(D) + eps);
}

}  // namespace kvkit
