// RMSNorm and RoPE on the values one row-group of lanes holds in registers.
#pragma once
#include "storage.cuh"

namespace kvkit {

constexpr unsigned kFullWarp = 0xffffffffu;

// cos and sin of pair j at `position`: a cache row (cos ‖ sin), or the f32 angle position · f_j.
__device__ __forceinline__ void cosSinAt(long long position, int j, int halfR, const void* cache, long long cacheDType, const float* ropeFrequencies, float& c, float& s) {
  if (cache != nullptr) {
    const long long row = position * 2 * halfR;
    c = loadAnyFloat(cache, cacheDType, row + j);
    s = loadAnyFloat(cache, cacheDType, row + halfR + j);
  } else {
    sincosf(static_cast<float>(position) * ropeFrequencies[j], &s, &c);
  }
}

// Sum over the `lanes` lanes of one row: an aligned power-of-two segment of the warp.
__device__ __forceinline__ float sumOverLanes(float x, int lanes) {
  for (int offset = lanes >> 1; offset > 0; offset >>= 1) x += __shfl_xor_sync(kFullWarp, x, offset);
  return x;
}

// A token's cos ‖ sin row in f32 (in shared memory, filled once per block).
struct CosSinRow {
  const float* row;
  __device__ __forceinline__ float operator()(int i) const { return row[i]; }
};

/**
 * RoPE over the first R elements of one row. Lane `lane` of `lanes` holds
 * vectors lane + k*lanes (k < NV) of VEC elements each; `cs(i)` is element i
 * of the token's cos ‖ sin row. gptj pairs sit inside a vector; neox partners
 * are R/2 elements (a whole number of vectors, checked on the host) away,
 * fetched with shuffles. Every lane of the warp must call this (it shuffles).
 */
template <int VEC, int NV, typename CosSin>
__device__ __forceinline__ void rotateRow(float (&x)[NV][VEC], int lane, int lanes, int numVec, int R, bool gptj, const CosSin& cs) {
  const int halfR = R >> 1;
  if (gptj) {
#pragma unroll
    for (int k = 0; k < NV; k++) {
      const int first = (lane + k * lanes) * VEC;
      if (lane + k * lanes >= numVec || first >= R) continue;
#pragma unroll
      for (int u = 0; u < VEC; u += 2) {
        const int e = first + u;
        if (e >= R) break;
        const float c = cs(e >> 1);
        const float s = cs(halfR + (e >> 1));
        const float a = x[k][u];
        const float b = x[k][u + 1];
        x[k][u] = a * c - b * s;
        x[k][u + 1] = b * c + a * s;
      }
    }
    return;
  }
  const int offsetVec = halfR / VEC;
  float partner[NV][VEC] = {};
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int vi = lane + k * lanes;
    const int pv = vi < offsetVec ? vi + offsetVec : vi - offsetVec;
    const int srcLane = pv & (lanes - 1);
    const int srcSlot = pv / lanes;
#pragma unroll
    for (int slot = 0; slot < NV; slot++) {
#pragma unroll
      for (int u = 0; u < VEC; u++) {
        const float got = __shfl_sync(kFullWarp, x[slot][u], srcLane, lanes);
        if (srcSlot == slot) partner[k][u] = got;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
    if (lane + k * lanes >= numVec || first >= R) continue;
    if (first < halfR) {
#pragma unroll
      for (int u = 0; u < VEC; u++) x[k][u] = x[k][u] * cs(first + u) - partner[k][u] * cs(halfR + first + u);
    } else {
#pragma unroll
      for (int u = 0; u < VEC; u++) x[k][u] = x[k][u] * cs(first - halfR + u) + partner[k][u] * cs(first + u);
    }
  }
}

}  // namespace kvkit
