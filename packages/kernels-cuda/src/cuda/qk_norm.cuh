// Q/K-norm (Qwen3, Gemma 3): RMSNorm of one head row over D before RoPE, x * inv * w,
// on the values a row's lanes already hold; the sum of squares in f32.
#pragma once
#include "rope.cuh"
#include "storage.cuh"

namespace kvkit {

/**
 * Norms the row a group of `lanes` lanes holds (vectors lane + k*lanes, zeros
 * past the row) when `apply`; every lane of `mask` (the warp, or the row's
 * group) must call it, since the partial sums meet through shuffles.
 * `weight` may be null where !apply.
 */
template <typename S, int NV>
__device__ __forceinline__ void normRowInLanes(float (&x)[NV][S::kPer16], bool apply, const void* weight, bool weightIsF32, float eps, int lane, int lanes, int D, unsigned mask = kFullWarp) {
  constexpr int VEC = S::kPer16;
  float sumSquares = 0.0f;
#pragma unroll
  for (int k = 0; k < NV; k++)
#pragma unroll
    for (int u = 0; u < VEC; u++) sumSquares = fmaf(x[k][u], x[k][u], sumSquares);
  sumSquares = sumOverLanes(sumSquares, lanes, mask);
  if (!apply) return;
  const float inv = rsqrtf(sumSquares / static_cast<float>(D) + eps);
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
