// Element storage: how each dtype is loaded as f32 and stored back, rounded once
// (round to nearest, ties to even), 16 bytes at a time where rows are aligned.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "generated/params.cuh"  // FloatCode

namespace kvkit {

struct F32 {
  using Bits = uint32_t;
  static constexpr int kPer16 = 4;
  static __device__ __forceinline__ float toFloat(Bits b) { return __uint_as_float(b); }
  static __device__ __forceinline__ Bits fromFloat(float x) { return __float_as_uint(x); }
};

struct F16 {
  using Bits = uint16_t;
  static constexpr int kPer16 = 8;
  static __device__ __forceinline__ float toFloat(Bits b) { return __half2float(__ushort_as_half(b)); }
  static __device__ __forceinline__ Bits fromFloat(float x) { return __half_as_ushort(__float2half_rn(x)); }
};

struct Bf16 {
  using Bits = uint16_t;
  static constexpr int kPer16 = 8;
  // Exact: a bf16 is the high half of an f32.
  static __device__ __forceinline__ float toFloat(Bits b) { return __uint_as_float(static_cast<uint32_t>(b) << 16); }
  static __device__ __forceinline__ Bits fromFloat(float x) { return __bfloat16_as_ushort(__float2bfloat16_rn(x)); }
};

// 16 bytes as 4 words, the unit of every vector load and store.
__device__ __forceinline__ uint4 load16(const void* p) { return *reinterpret_cast<const uint4*>(p); }
__device__ __forceinline__ void store16(void* p, uint4 v) { *reinterpret_cast<uint4*>(p) = v; }
// Data read or written once per call: marked evict-first, so weights, caches and indices stay in L2.
__device__ __forceinline__ uint4 loadOnce16(const void* p) { return __ldcs(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ void storeOnce16(void* p, uint4 v) { __stcs(reinterpret_cast<uint4*>(p), v); }
// The same for the 8 and 4 bytes one vector becomes in an fp8 pool.
__device__ __forceinline__ void storeOnce8(void* p, uint2 v) { __stcs(reinterpret_cast<uint2*>(p), v); }
__device__ __forceinline__ void storeOnce4(void* p, uint32_t v) { __stcs(reinterpret_cast<unsigned int*>(p), v); }

__device__ __forceinline__ uint32_t word(const uint4& v, int i) { return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w; }

// Unpacks one 16-byte vector of S into f32 values.
template <typename S>
__device__ __forceinline__ void unpack16(const uint4& v, float (&out)[S::kPer16]) {
  if constexpr (S::kPer16 == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++) out[i] = S::toFloat(word(v, i));
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const uint32_t w = word(v, i);
      out[2 * i] = S::toFloat(static_cast<typename S::Bits>(w & 0xffffu));
      out[2 * i + 1] = S::toFloat(static_cast<typename S::Bits>(w >> 16));
    }
  }
}

// Packs f32 values into one 16-byte vector of S, each rounded once.
template <typename S>
__device__ __forceinline__ uint4 pack16(const float (&in)[S::kPer16]) {
  uint32_t w[4];
  if constexpr (S::kPer16 == 4) {
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = S::fromFloat(in[i]);
  } else {
#pragma unroll
    for (int i = 0; i < 4; i++) w[i] = static_cast<uint32_t>(S::fromFloat(in[2 * i])) | (static_cast<uint32_t>(S::fromFloat(in[2 * i + 1])) << 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// One element of S at index i, as f32.
template <typename S>
__device__ __forceinline__ float loadElement(const void* base, long long i) {
  return S::toFloat(reinterpret_cast<const typename S::Bits*>(base)[i]);
}

template <typename S>
__device__ __forceinline__ void storeElement(void* base, long long i, float x) {
  reinterpret_cast<typename S::Bits*>(base)[i] = S::fromFloat(x);
}

// Bit-exact element copy (V passes through untouched, NaN payloads included).
template <typename S>
__device__ __forceinline__ void copyElement(void* dst, long long di, const void* src, long long si) {
  reinterpret_cast<typename S::Bits*>(dst)[di] = reinterpret_cast<const typename S::Bits*>(src)[si];
}

// An element of a tensor whose float dtype is known only at run time (weights, cos/sin caches).
__device__ __forceinline__ float loadAnyFloat(const void* base, long long code, long long i) {
  if (code == kF32) return loadElement<F32>(base, i);
  if (code == kF16) return loadElement<F16>(base, i);
  return loadElement<Bf16>(base, i);
}

// An index value (positions, slots): i32 widened, or i64 as is.
__device__ __forceinline__ long long loadIndex(const void* base, long long is64, long long i) {
  return is64 ? reinterpret_cast<const long long*>(base)[i] : static_cast<long long>(reinterpret_cast<const int*>(base)[i]);
}

// kPer16 weights of row `offset` in S or in f32, as f32 (kNormWeight may be either).
template <typename S>
__device__ __forceinline__ void loadWeights(const void* base, long long offset, bool isF32, float (&out)[S::kPer16]) {
  if (isF32) {
    const float* w = reinterpret_cast<const float*>(base) + offset;
#pragma unroll
    for (int part = 0; part < S::kPer16 / 4; part++) {
      float four[4];
      unpack16<F32>(load16(w + 4 * part), four);
#pragma unroll
      for (int i = 0; i < 4; i++) out[4 * part + i] = four[i];
    }
  } else {
    unpack16<S>(load16(reinterpret_cast<const typename S::Bits*>(base) + offset), out);
  }
}

}  // namespace kvkit
