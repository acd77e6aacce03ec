// Kernels for measuring, not for ops: a stream-holding spin, the copy ceiling, random fills.
#include "generated/params.cuh"
#include "storage.cuh"

namespace kvkit {

__device__ __forceinline__ unsigned long long globalNanoseconds() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// A 64-bit mix (splitmix64's finaliser): index -> well-spread bits.
__device__ __forceinline__ unsigned long long mix(unsigned long long x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename S>
__device__ __forceinline__ void fillRandom(const FillParams& p) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += stride) {
    const unsigned long long bits = mix(static_cast<unsigned long long>(p.seed) * 0x9e3779b97f4a7c15ull + static_cast<unsigned long long>(i));
    const float unit = static_cast<float>(bits >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    storeElement<S>(p.data, i, static_cast<float>((2.0f * unit - 1.0f) * p.scale));
  }
}

}  // namespace kvkit

using kvkit::CopyParams;
using kvkit::FillParams;
using kvkit::SpinParams;

// Holds the stream for a while, so the host can enqueue a batch that then runs back to back.
extern "C" __global__ void __launch_bounds__(kvkit::SpinLaunch::kThreads) spin_stream(const SpinParams p) {
  const unsigned long long start = kvkit::globalNanoseconds();
  while (kvkit::globalNanoseconds() - start < static_cast<unsigned long long>(p.nanoseconds)) {
  }
}

// A bandwidth ceiling: a grid-stride copy of 16-byte vectors.
extern "C" __global__ void __launch_bounds__(kvkit::CopyLaunch::kThreads) copy_vectors(const CopyParams p) {
  const long long stride = static_cast<long long>(gridDim.x) * blockDim.x;
  const uint4* src = static_cast<const uint4*>(p.src);
  uint4* dst = static_cast<uint4*>(p.dst);
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.vectors; i += stride) dst[i] = src[i];
}

// A bandwidth ceiling: one pass, each thread loading all its vectors before storing any (streaming hints).
extern "C" __global__ void __launch_bounds__(kvkit::CopyUnrolledLaunch::kThreads) copy_vectors_unrolled(const CopyParams p) {
  using L = kvkit::CopyUnrolledLaunch;
  const uint4* src = static_cast<const uint4*>(p.src);
  uint4* dst = static_cast<uint4*>(p.dst);
  const long long first = static_cast<long long>(blockIdx.x) * (L::kThreads * L::kVectorsPerThread) + threadIdx.x;
  uint4 held[L::kVectorsPerThread];
#pragma unroll
  for (int u = 0; u < L::kVectorsPerThread; u++) {
    const long long i = first + static_cast<long long>(u) * L::kThreads;
    if (i < p.vectors) held[u] = __ldcs(src + i);
  }
#pragma unroll
  for (int u = 0; u < L::kVectorsPerThread; u++) {
    const long long i = first + static_cast<long long>(u) * L::kThreads;
    if (i < p.vectors) __stcs(dst + i, held[u]);
  }
}

extern "C" __global__ void __launch_bounds__(kvkit::FillLaunch::kThreads) fill_random_f32(const FillParams p) { kvkit::fillRandom<kvkit::F32>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::FillLaunch::kThreads) fill_random_f16(const FillParams p) { kvkit::fillRandom<kvkit::F16>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::FillLaunch::kThreads) fill_random_bf16(const FillParams p) { kvkit::fillRandom<kvkit::Bf16>(p); }
