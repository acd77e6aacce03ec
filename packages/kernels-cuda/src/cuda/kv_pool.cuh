// KV pools (ops/kvPools.ts; the rules: contracts/src/backend/kvPoolLayout.ts): where the row of a slot's
// head sits, NHD or HND, and how a row of the model dtype is stored there: its bits, or fp8 codes of x / scale.
// The rope kernels store their K and V rows through it inside their row loops; dequantizeKv reads rows back.
#pragma once
#include <stdint.h>

#include "fp8.cuh"
#include "storage.cuh"

namespace kvkit {

// What a pool holds (the kernels' poolDType field).
enum PoolCode : int { kPoolModelDType = 0, kPoolE4m3 = 1, kPoolE5m2 = 2 };

// Where slot s's rows sit within one layer (layers are the caller's stride), the twin of kvPoolLayout.ts poolRowStart:
// NHD (s*H + h)*D; HND page s / pageSize, row s % pageSize, ((page*H + h)*pageSize + row)*D. Either way D contiguous elements.
// Split in two so the vector paths divide once per slot: head 0's row, and the elements from one head's row to the next.
__host__ __device__ inline long long poolSlotElement(bool headMajor, long long slot, long long H, long long D, long long pageSize) {
  if (!headMajor) return slot * H * D;
  const long long page = slot / pageSize;
  return (page * H * pageSize + (slot - page * pageSize)) * D;
}

__host__ __device__ inline long long poolHeadStride(bool headMajor, long long D, long long pageSize) { return headMajor ? pageSize * D : D; }

// The first element of head `head` of `slot` within one layer.
__host__ __device__ inline long long poolElement(bool headMajor, long long slot, long long head, long long H, long long D, long long pageSize) {
  return poolSlotElement(headMajor, slot, H, D, pageSize) + head * poolHeadStride(headMajor, D, pageSize);
}

// The quotient an fp8 pool stores the code of: IEEE f32 division, correctly rounded (kvPoolLayout.ts quantizeToFp8).
__host__ __device__ inline float poolQuotient(float x, float scale) {
#ifdef __CUDA_ARCH__
  return __fdiv_rn(x, scale);
#else
  return x / scale;
#endif
}

// Four values as the codes of x / scale, packed little-endian (value 0 in the low byte), as the pool holds them.
__host__ __device__ __forceinline__ uint32_t fp8QuadOf(const float* x, float scale, bool e4m3) {
  const uint32_t low = fp8PairOfFloats(poolQuotient(x[0], scale), poolQuotient(x[1], scale), e4m3);
  const uint32_t high = fp8PairOfFloats(poolQuotient(x[2], scale), poolQuotient(x[3], scale), e4m3);
  return low | (high << 16);
}

/**
 * One pool row's destination as a kernel stores into it: the pool (element 0
 * of the layer's or call's pool), what it holds, and the scale of the row's
 * head where that is fp8. A dense output (kRot's layout, materialize's rows)
 * is a pool of the model dtype.
 */
struct PoolTarget {
  void* base;
  int code;
  float scale;
};

// The same from a kernel's parameters: the fields poolWriteParams declares (contracts/src/kernels/kvPools.ts),
// which RopePoolParams and FusedNormRopeParams both carry, with their numKvHeads and headDim.
template <typename P>
__device__ __forceinline__ long long poolSlotOf(const P& p, long long slot) {
  return poolSlotElement(p.poolHeadMajor != 0, slot, p.numKvHeads, p.headDim, p.poolPageSize);
}

template <typename P>
__device__ __forceinline__ long long poolHeadStrideOf(const P& p) {
  return poolHeadStride(p.poolHeadMajor != 0, p.headDim, p.poolPageSize);
}

template <typename P>
__device__ __forceinline__ long long poolRowOf(const P& p, long long slot, long long head) {
  return poolElement(p.poolHeadMajor != 0, slot, head, p.numKvHeads, p.headDim, p.poolPageSize);
}

// The K pool's (values false) or the V pool's (values true) target for rows of head `head`, at `base`.
// A kernel built for model-dtype pools only (MAY_BE_FP8 false) has no fp8 code to carry.
template <typename P, bool MAY_BE_FP8 = true>
__device__ __forceinline__ PoolTarget poolTarget(const P& p, void* base, bool values, long long head) {
  const int code = MAY_BE_FP8 ? static_cast<int>(p.poolDType) : kPoolModelDType;
  if (code == kPoolModelDType) return PoolTarget{base, code, 1.0f};
  const float* scale = values ? p.vScale : p.kScale;
  const bool perHead = (values ? p.vScalePerHead : p.kScalePerHead) != 0;
  return PoolTarget{base, code, __ldg(scale + (perHead ? head : 0))};
}

// Element i of the target: `bits` (a value of S) as they are, or the code of its value / scale (a byte store: the element path's).
template <typename S>
__device__ __forceinline__ void storePoolElement(const PoolTarget& t, long long i, typename S::Bits bits) {
  if (t.code == kPoolModelDType) {
    reinterpret_cast<typename S::Bits*>(t.base)[i] = bits;
  } else {
    static_cast<uint8_t*>(t.base)[i] = static_cast<uint8_t>(fp8OfFloat(poolQuotient(S::toFloat(bits), t.scale), t.code == kPoolE4m3));
  }
}

/**
 * One lane's 16-byte vector of S (kPer16 values) at element `first` of the
 * target, one store: the vector itself, or its codes, 8 bytes (16-bit
 * dtypes) or 4 (f32). `first` is a multiple of kPer16 in a row of a multiple
 * of kPer16 elements and the pool is 16-byte aligned (the host's vector-path
 * rule), so every store is aligned to its size.
 */
template <typename S, bool MAY_BE_FP8 = true>
__device__ __forceinline__ void storePoolVector(const PoolTarget& t, long long first, const uint4& bits) {
  constexpr int VEC = S::kPer16;
  if (!MAY_BE_FP8 || t.code == kPoolModelDType) {
    storeOnce16(static_cast<char*>(t.base) + first * static_cast<long long>(sizeof(typename S::Bits)), bits);
    return;
  }
  float x[VEC];
  unpack16<S>(bits, x);
  char* at = static_cast<char*>(t.base) + first;
  const bool e4m3 = t.code == kPoolE4m3;
  if constexpr (VEC == 4) {
    storeOnce4(at, fp8QuadOf(x, t.scale, e4m3));
  } else {
    storeOnce8(at, make_uint2(fp8QuadOf(x, t.scale, e4m3), fp8QuadOf(x + 4, t.scale, e4m3)));
  }
}

}  // namespace kvkit
