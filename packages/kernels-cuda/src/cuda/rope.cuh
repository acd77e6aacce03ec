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

/**
 * The cos and sin of one token that a lane needs for its elements, kept for
 * every row of the token it handles. They live in the lane's own slots of
 * shared memory (quad q of thread i at quads[q * blockDim.x + i]: no bank
 * conflicts, no barrier, since only the owning thread reads them), which
 * leaves the registers to the rows in flight. The rotation's sign is folded
 * into sin, so element x with partner y becomes x·cos + y·sin. Elements past
 * R keep cos 1 and sin 0 (and are not rotated).
 */
template <int VEC, int NV>
struct LaneAngles {
  static constexpr int kQuads = 2 * NV * VEC / 4;
  float4* slots;
  unsigned stride;

  __device__ __forceinline__ LaneAngles(void* shared) : slots(static_cast<float4*>(shared) + threadIdx.x), stride(blockDim.x) {}

  __device__ __forceinline__ void store(int k, const float (&c)[VEC], const float (&s)[VEC]) const {
#pragma unroll
    for (int q = 0; q < VEC / 4; q++) {
      slots[(k * VEC / 4 + q) * stride] = make_float4(c[4 * q], c[4 * q + 1], c[4 * q + 2], c[4 * q + 3]);
      slots[((NV + k) * VEC / 4 + q) * stride] = make_float4(s[4 * q], s[4 * q + 1], s[4 * q + 2], s[4 * q + 3]);
    }
  }

  __device__ __forceinline__ void load(int k, float (&c)[VEC], float (&s)[VEC]) const {
#pragma unroll
    for (int q = 0; q < VEC / 4; q++) {
      const float4 cq = slots[(k * VEC / 4 + q) * stride];
      const float4 sq = slots[((NV + k) * VEC / 4 + q) * stride];
      c[4 * q] = cq.x, c[4 * q + 1] = cq.y, c[4 * q + 2] = cq.z, c[4 * q + 3] = cq.w;
      s[4 * q] = sq.x, s[4 * q + 1] = sq.y, s[4 * q + 2] = sq.z, s[4 * q + 3] = sq.w;
    }
  }

  // One element's pair, u counted at run time (the sincos path fills one element at a time).
  __device__ __forceinline__ void storeOne(int k, int u, float c, float s) const {
    reinterpret_cast<float*>(slots + (k * VEC / 4 + u / 4) * stride)[u & 3] = c;
    reinterpret_cast<float*>(slots + ((NV + k) * VEC / 4 + u / 4) * stride)[u & 3] = s;
  }
};

// Where the angles come from: a cos ‖ sin cache (any float dtype), or f_j with the angle in f32.
struct AngleSource {
  const void* cache;
  long long cacheDType;
  bool cacheVectors;  // f32 cache, a lane's runs on 16-byte boundaries
  const float* ropeFrequencies;
};

// Elements [first, first + count) of a cache in storage C, as f32; the rest of `out` is left as it is.
template <typename C, int N>
__device__ __forceinline__ void loadRun(const void* cache, long long first, int count, float (&out)[N]) {
  const typename C::Bits* at = static_cast<const typename C::Bits*>(cache) + first;
#pragma unroll
  for (int m = 0; m < N; m++)
    if (m < count) out[m] = C::toFloat(at[m]);
}

// loadRun for a cache dtype known at run time: one branch per run, not per element.
template <int N>
__device__ __forceinline__ void loadAnyRun(const void* cache, long long cacheDType, long long first, int count, float (&out)[N]) {
  if (cacheDType == kF32) {
    loadRun<F32, N>(cache, first, count, out);
  } else if (cacheDType == kF16) {
    loadRun<F16, N>(cache, first, count, out);
  } else {
    loadRun<Bf16, N>(cache, first, count, out);
  }
}

template <int N>
__device__ __forceinline__ void loadFloats(const float* from, float (&out)[N]) {
#pragma unroll
  for (int i = 0; i < N; i += 4) {
    const uint4 v = load16(from + i);
    out[i] = __uint_as_float(v.x);
    out[i + 1] = __uint_as_float(v.y);
    out[i + 2] = __uint_as_float(v.z);
    out[i + 3] = __uint_as_float(v.w);
  }
}

/**
 * Fills the lane's angles for its vectors lane + k*lanes of a token at
 * `position` (`valid` false: identity, nothing read). neox pairs (j, j + R/2)
 * with R/2 a whole number of vectors; gptj pairs (2j, 2j + 1) inside a vector.
 */
template <int VEC, int NV>
__device__ __forceinline__ void fillLaneAngles(const LaneAngles<VEC, NV>& a, bool valid, long long position, int lane, int lanes, int R, bool gptj, const AngleSource& src) {
  const int halfR = R >> 1;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
    const bool rotated = valid && first < R;
    if (rotated && src.cache == nullptr) {
      // sincos one element at a time: few registers live while the rows' loads are in flight.
#pragma unroll 1
      for (int u = 0; u < VEC; u++) {
        const int e = first + u;
        float c = 1.0f, s = 0.0f;
        if (e < R) {
          const bool firstOfPair = gptj ? (e & 1) == 0 : e < halfR;
          const int j = gptj ? e >> 1 : firstOfPair ? e : e - halfR;
          sincosf(static_cast<float>(position) * src.ropeFrequencies[j], &s, &c);
          if (firstOfPair) s = -s;
        }
        a.storeOne(k, u, c, s);
      }
      continue;
    }
    float c[VEC], s[VEC];
#pragma unroll
    for (int u = 0; u < VEC; u++) {
      c[u] = 1.0f;
      s[u] = 0.0f;
    }
    if (rotated && gptj) {
      // Pairs (first + 2m, first + 2m + 1) share j = first/2 + m.
      float pc[VEC / 2], ps[VEC / 2];
      if (src.cacheVectors && VEC / 2 % 4 == 0) {
        const float* row = static_cast<const float*>(src.cache) + position * R + (first >> 1);
        loadFloats<VEC / 2>(row, pc);
        loadFloats<VEC / 2>(row + halfR, ps);
      } else {
#pragma unroll
        for (int m = 0; m < VEC / 2; m++) {
          pc[m] = 1.0f;
          ps[m] = 0.0f;
        }
        // Only pairs inside R: a vector may run past R when R is not a multiple of it.
        const int pairs = min(VEC / 2, (R - first) >> 1);
        const long long row = position * R + (first >> 1);
        loadAnyRun<VEC / 2>(src.cache, src.cacheDType, row, pairs, pc);
        loadAnyRun<VEC / 2>(src.cache, src.cacheDType, row + halfR, pairs, ps);
      }
#pragma unroll
      for (int m = 0; m < VEC / 2; m++) {
        if (first + 2 * m >= R) break;
        c[2 * m] = pc[m];
        c[2 * m + 1] = pc[m];
        s[2 * m] = -ps[m];
        s[2 * m + 1] = ps[m];
      }
    } else if (rotated) {
      // A whole vector sits in one half: j runs from j0, the sign is the half's.
      const bool firstHalf = first < halfR;
      const int j0 = firstHalf ? first : first - halfR;
      if (src.cacheVectors) {
        const float* row = static_cast<const float*>(src.cache) + position * R + j0;
        loadFloats<VEC>(row, c);
        loadFloats<VEC>(row + halfR, s);
      } else {
        const long long row = position * R + j0;
        loadAnyRun<VEC>(src.cache, src.cacheDType, row, VEC, c);
        loadAnyRun<VEC>(src.cache, src.cacheDType, row + halfR, VEC, s);
      }
      if (firstHalf) {
#pragma unroll
        for (int u = 0; u < VEC; u++) s[u] = -s[u];
      }
    }
    a.store(k, c, s);
  }
}

/**
 * One rotated element, x·c + partner·s with s signed for the element's half,
 * rounded in a fixed order (no contraction left to the compiler): the vector
 * and element paths give the same bits, so a view that takes the element
 * path reads exactly what its contiguous copy gives.
 */
__device__ __forceinline__ float rotatedElement(float x, float partner, float c, float s) { return __fmaf_rn(partner, s, __fmul_rn(x, c)); }

/**
 * RoPE over the first R elements of one row. Lane `lane` of `lanes` holds
 * vectors lane + k*lanes (k < NV) of VEC elements each. gptj partners sit
 * inside a vector; neox partners are R/2 elements (a whole number of vectors,
 * checked on the host) away, fetched with shuffles. Every lane of the warp
 * must call this (it shuffles).
 */
template <int VEC, int NV>
__device__ __forceinline__ void rotateRow(float (&x)[NV][VEC], const LaneAngles<VEC, NV>& a, int lane, int lanes, int R, bool gptj) {
  float partner[NV][VEC];
  if (gptj) {
#pragma unroll
    for (int k = 0; k < NV; k++)
#pragma unroll
      for (int u = 0; u < VEC; u++) partner[k][u] = x[k][u ^ 1];
  } else {
    const int offsetVec = (R >> 1) / VEC;
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
  }
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
    if (first >= R) continue;
    float c[VEC], s[VEC];
    a.load(k, c, s);
#pragma unroll
    for (int u = 0; u < VEC; u++)
      if (first + u < R) x[k][u] = rotatedElement(x[k][u], partner[k][u], c[u], s[u]);
  }
}

}  // namespace kvkit
