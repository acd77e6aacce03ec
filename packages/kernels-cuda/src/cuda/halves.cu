// Host transfers of f16/bf16 tensors: the host moves f32 and the device converts, with the rounding and NaN rules
// of the host codec (contracts' halfFloats.ts) bit for bit, so a tensor is the same whichever path filled it.
#include "generated/params.cuh"

namespace kvkit {

constexpr uint32_t kF16QuietNan = 0x7e00;
constexpr uint32_t kBf16QuietNan = 0x7fc0;

// f16 bits of f32 bits: round to nearest even; overflow to Infinity, exact subnormals, every NaN to the quiet NaN.
__device__ __forceinline__ uint32_t f16OfF32Bits(uint32_t b) {
  const uint32_t a = b & 0x7fffffffu;
  const uint32_t sign = (b >> 16) & 0x8000u;
  if (a >= 0x38800000u) {
    if (a < 0x47800000u) return sign | ((a - 0x38000000u + 0xfffu + ((a >> 13) & 1u)) >> 13);
    return a > 0x7f800000u ? kF16QuietNan : sign | 0x7c00u;
  }
  if (a <= 0x33000000u) return sign;
  const uint32_t significand = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - (a >> 23);
  return sign | ((significand + (1u << (shift - 1)) - 1u + ((significand >> shift) & 1u)) >> shift);
}

__device__ __forceinline__ uint32_t bf16OfF32Bits(uint32_t b) {
  if ((b & 0x7fffffffu) > 0x7f800000u) return kBf16QuietNan;
  return (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
}

// f32 bits of f16 bits, exact (NaN payloads kept).
__device__ __forceinline__ uint32_t f32BitsOfF16(uint32_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t fraction = h & 0x3ffu;
  if (exponent == 0x1fu) return sign | 0x7f800000u | (fraction << 13);
  if (exponent > 0) return sign | ((exponent + 112u) << 23) | (fraction << 13);
  return sign | __float_as_uint(static_cast<float>(fraction) * 5.9604644775390625e-8f);  // fraction · 2^-24, exact
}

template <bool kBf16>
__device__ __forceinline__ void halvesFromF32(const HalvesParams& p) {
  const uint32_t* src = static_cast<const uint32_t*>(p.src);
  uint16_t* dst = static_cast<uint16_t*>(p.dst);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride)
    dst[i] = static_cast<uint16_t>(kBf16 ? bf16OfF32Bits(src[i]) : f16OfF32Bits(src[i]));
}

template <bool kBf16>
__device__ __forceinline__ void halvesToF32(const HalvesParams& p) {
  const uint16_t* src = static_cast<const uint16_t*>(p.src);
  uint32_t* dst = static_cast<uint32_t*>(p.dst);
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride)
    dst[i] = kBf16 ? static_cast<uint32_t>(src[i]) << 16 : f32BitsOfF16(src[i]);
}

}  // namespace kvkit

using kvkit::HalvesParams;

extern "C" __global__ void __launch_bounds__(kvkit::HalvesLaunch::kThreads) halves_from_f32_f16(const HalvesParams p) { kvkit::halvesFromF32<false>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::HalvesLaunch::kThreads) halves_from_f32_bf16(const HalvesParams p) { kvkit::halvesFromF32<true>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::HalvesLaunch::kThreads) halves_to_f32_f16(const HalvesParams p) { kvkit::halvesToF32<false>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::HalvesLaunch::kThreads) halves_to_f32_bf16(const HalvesParams p) { kvkit::halvesToF32<true>(p); }
