// fp8 on the device, as the host codec (contracts/src/backend/fp8.ts) defines it: round to nearest even,
// saturating to the largest finite value, NaN to the canonical NaN (0x7f e4m3, 0x7e e5m2); exact decoding.
// Hardware conversions where the device has them (sm_89 and later), the same results in software elsewhere.
#pragma once
#include <cuda_fp8.h>
#include <stdint.h>
#include <string.h>

namespace kvkit {

struct Fp8Format {
  int fraction, minExponent;
  uint32_t maxCode, nan;
  bool ieeeTop;
};

__host__ __device__ constexpr Fp8Format fp8Format(bool e4m3) { return e4m3 ? Fp8Format{3, -6, 0x7e, 0x7f, false} : Fp8Format{2, -14, 0x7b, 0x7e, true}; }

// On the grid of b's binade (at least the smallest normal one): the steps from zero, rounded to nearest even.
__host__ __device__ inline uint32_t fp8OfBitsSoftware(uint32_t b, bool e4m3) {
  const Fp8Format f = fp8Format(e4m3);
  const uint32_t a = b & 0x7fffffffu;
  if (a > 0x7f800000u) return f.nan;
  const uint32_t sign = (b >> 24) & 0x80u;
  if (a < 0x00800000u) return sign;  // f32 subnormals are far below every fp8 value
  const int e = static_cast<int>(a >> 23) - 127;
  const int binade = e > f.minExponent ? e : f.minExponent;
  const uint32_t m = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = static_cast<uint32_t>(23 - f.fraction + binade - e);
  const uint32_t steps = shift < 25 ? (m + (1u << (shift - 1)) - 1u + ((m >> shift) & 1u)) >> shift : 0u;
  const uint32_t code = (static_cast<uint32_t>(binade - f.minExponent) << f.fraction) + steps;
  return sign | (code < f.maxCode ? code : f.maxCode);
}

__device__ __forceinline__ uint32_t fp8OfFloat(float x, bool e4m3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (isnan(x)) return fp8Format(e4m3).nan;
  return __nv_cvt_float_to_fp8(x, __NV_SATFINITE, e4m3 ? __NV_E4M3 : __NV_E5M2);
#else
  return fp8OfBitsSoftware(__float_as_uint(x), e4m3);
#endif
}

// A float's bits in host code as well as device code (the host tests run the software path).
__host__ __device__ inline uint32_t bitsOfFloat(float x) {
  uint32_t bits;
  memcpy(&bits, &x, sizeof bits);
  return bits;
}

// Codes of a and b in the two bytes of the result, a in the low one: the same per value as fp8OfFloat
// (sm_89+: one paired conversion, whose NaN results are then made canonical).
__host__ __device__ __forceinline__ uint32_t fp8PairOfFloats(float a, float b, bool e4m3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  uint32_t pair = __nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, e4m3 ? __NV_E4M3 : __NV_E5M2);
  const uint32_t nan = fp8Format(e4m3).nan;
  if (isnan(a)) pair = (pair & 0xff00u) | nan;
  if (isnan(b)) pair = (pair & 0x00ffu) | (nan << 8);
  return pair;
#else
  return fp8OfBitsSoftware(bitsOfFloat(a), e4m3) | (fp8OfBitsSoftware(bitsOfFloat(b), e4m3) << 8);
#endif
}

// The exact value of a code.
__host__ __device__ inline float fp8ToFloat(uint32_t code, bool e4m3) {
  const Fp8Format f = fp8Format(e4m3);
  const float sign = (code & 0x80u) ? -1.0f : 1.0f;
  const uint32_t magnitude = code & 0x7fu;
  const uint32_t exponent = magnitude >> f.fraction;
  const uint32_t mantissa = magnitude & ((1u << f.fraction) - 1u);
  if (f.ieeeTop && exponent == (0x7fu >> f.fraction)) return mantissa == 0 ? sign * INFINITY : NAN;
  if (!f.ieeeTop && magnitude == 0x7fu) return NAN;
  // Every fp8 value is a small integer times a power of two: exact in f32 either way.
  if (exponent == 0) return sign * ldexpf(static_cast<float>(mantissa), f.minExponent - f.fraction);
  return sign * ldexpf(static_cast<float>(mantissa | (1u << f.fraction)), static_cast<int>(exponent) - 1 + f.minExponent - f.fraction);
}

}  // namespace kvkit
