// RMSNorm and RoPE on the values one row-group of lanes holds in registers.
#pragma once
#include "storage.cuh"

namespace kvkit {

constexpr unsigned kFullWarp = 0xffffffffu;

// Words of the angle table (backend/rope.ts ropeAngleTable) ahead of the pairs, and its first f32-reduction exponent.
constexpr int kAngleHeaderWords = 4;
constexpr int kFirstReductionExponent = -24;
constexpr int kLastReductionExponent = 40;

// n · g mod 1 as a 64-bit fraction of a turn, g the 96-bit fraction at `g` (most significant word first).
__device__ __forceinline__ unsigned long long turnsOf(unsigned long long n, const unsigned* g) {
  const unsigned long long high = (static_cast<unsigned long long>(g[0]) << 32) | g[1];
  const unsigned long long lowProduct = n * g[2];
  // Whole turns fall off the top of n · high; n · g[2] adds its bits above 2^-64.
  return n * high + ((__umul64hi(n, g[2]) << 32) | (lowProduct >> 32));
}

// cos and sin of x + tail, |x| <= π/4, |tail| within half an ulp of x: the polynomials of the WebGPU path.
__device__ __forceinline__ void cosSinSmall(float x, float tail, float& c, float& s) {
  const float z = __fmul_rn(x, x);
  s = x + (tail * (1.0f - 0.5f * z) + x * z * (-1.6666654611e-1f + z * (8.3321608736e-3f + z * -1.9515295891e-4f)));
  const float half = 0.5f * z;
  const float w = __fsub_rn(1.0f, half);
  c = w + (__fsub_rn(__fsub_rn(1.0f, w), half) + (z * z * (4.166664568298827e-2f + z * (-1.388731625493765e-3f + z * 2.443315711809948e-5f)) - x * tail));
}

// cos and sin of 2π·t, t a 64-bit fraction of a turn: the nearest quarter turn, then the rest in two f32 parts.
__device__ __forceinline__ void cosSinOfTurns(unsigned long long t, float& c, float& s) {
  const unsigned long long shifted = t + (1ull << 61);
  const unsigned quadrant = static_cast<unsigned>(shifted >> 62);
  const long long rest = static_cast<long long>(shifted & ((1ull << 62) - 1)) - (1ll << 61);
  const double x = static_cast<double>(rest) * (6.283185307179586 / 18446744073709551616.0);
  const float head = static_cast<float>(x);
  float cr, sr;
  cosSinSmall(head, static_cast<float>(x - static_cast<double>(head)), cr, sr);
  switch (quadrant) {
    case 1: c = -sr, s = cr; break;
    case 2: c = -cr, s = -sr; break;
    case 3: c = sr, s = -cr; break;
    default: c = cr, s = sr;
  }
}

/**
 * cos and sin of pair j at `position`, the magnitude applied, from the angle
 * table. 'exact' (mode 0): position · f_j/2π mod 1 in integers, exact to
 * 2^-64 turns at any position. 'float32' (mode 1): the angle
 * fround(fround(position) · f_j) of transformers, vLLM and SGLang, m·2^e,
 * reduced the same way by the fraction of 2^e/2π.
 */
__device__ __forceinline__ void ropeCosSin(long long position, int j, const unsigned* table, float& c, float& s) {
  const bool negative = position < 0;
  const unsigned long long n = negative ? 0ull - static_cast<unsigned long long>(position) : static_cast<unsigned long long>(position);
  const unsigned* pair = table + kAngleHeaderWords + 4 * j;
  if (table[0] == 0) {
    cosSinOfTurns(turnsOf(n, pair), c, s);
  } else {
    const float angle = __fmul_rn(__ull2float_rn(n), __uint_as_float(pair[3]));
    if (angle <= 0.785398163f) {
      cosSinSmall(angle, 0.0f, c, s);
    } else {
      const unsigned bits = __float_as_uint(angle);
      const int e = min(max(static_cast<int>((bits >> 23) & 0xff) - 150, kFirstReductionExponent), kLastReductionExponent);
      // The reduction fractions follow the R/2 pairs; the table's third word holds R/2.
      const unsigned* g = table + kAngleHeaderWords + 4 * table[2] + 4 * (e - kFirstReductionExponent);
      cosSinOfTurns(turnsOf((bits & 0x7fffffu) | 0x800000u, g), c, s);
    }
  }
  const float magnitude = __uint_as_float(table[1]);
  c *= magnitude;
  s = (negative ? -s : s) * magnitude;
}

// cos and sin of pair j at `position`: a cache row (cos ‖ sin), or the angle table's.
__device__ __forceinline__ void cosSinAt(long long position, int j, int halfR, const void* cache, long long cacheDType, const unsigned* angleTable, float& c, float& s) {
  if (cache != nullptr) {
    const long long row = position * 2 * halfR;
    c = loadAnyFloat(cache, cacheDType, row + j);
    s = loadAnyFloat(cache, cacheDType, row + halfR + j);
  } else {
    ropeCosSin(position, j, angleTable, c, s);
  }
}

// Sum over the `lanes` lanes of one row: an aligned power-of-two segment of the warp (`mask`: the lanes taking part).
__device__ __forceinline__ float sumOverLanes(float x, int lanes, unsigned mask = kFullWarp) {
  for (int offset = lanes >> 1; offset > 0; offset >>= 1) x += __shfl_xor_sync(mask, x, offset);
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

// Where the angles come from: a cos ‖ sin cache (any float dtype), or the angle table.
struct AngleSource {
  const void* cache;
  long long cacheDType;
  bool cacheVectors;  // f32 cache, a lane's runs on 16-byte boundaries
  const unsigned* angleTable;
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
 * `perPair` (mRoPE): pair j is at positionOf(j) instead, from the cache or
 * the angle table element by element (one inlined copy serves both cases).
 */
template <int VEC, int NV, typename PositionOf>
__device__ __forceinline__ void fillLaneAnglesAt(const LaneAngles<VEC, NV>& a, bool valid, long long position, int lane, int lanes, int R, bool gptj, const AngleSource& src, bool perPair, PositionOf positionOf) {
  const int halfR = R >> 1;
#pragma unroll
  for (int k = 0; k < NV; k++) {
    const int first = (lane + k * lanes) * VEC;
    const bool rotated = valid && first < R;
    if (rotated && (src.cache == nullptr || perPair)) {
      // sincos one element at a time: few registers live while the rows' loads are in flight.
#pragma unroll 1
      for (int u = 0; u < VEC; u++) {
        const int e = first + u;
        float c = 1.0f, s = 0.0f;
        if (e < R) {
          const bool firstOfPair = gptj ? (e & 1) == 0 : e < halfR;
          const int j = gptj ? e >> 1 : firstOfPair ? e : e - halfR;
          if (perPair) {
            cosSinAt(positionOf(j), j, halfR, src.cache, src.cacheDType, src.angleTable, c, s);
          } else {
            ropeCosSin(position, j, src.angleTable, c, s);
          }
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

// fillLaneAnglesAt for one position per token.
template <int VEC, int NV>
__device__ __forceinline__ void fillLaneAngles(const LaneAngles<VEC, NV>& a, bool valid, long long position, int lane, int lanes, int R, bool gptj, const AngleSource& src) {
  fillLaneAnglesAt<VEC, NV>(a, valid, position, lane, lanes, R, gptj, src, false, [](int) { return 0ll; });
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
