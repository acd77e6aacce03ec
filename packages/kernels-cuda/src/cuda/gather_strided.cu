// The strided gather: a view's elements, row-major, into a contiguous buffer, bits unchanged.
// It runs before an op whose kernel does not read that input through strides.
#include "generated/params.cuh"
#include "strided.cuh"

namespace kvkit {

// Grid-stride over the elements; Bits is an unsigned type of the element's width.
template <typename Bits>
__device__ __forceinline__ void gatherStrided(const GatherStridedParams& p) {
  const ViewDims dims = gatherDims(p);
  const Bits* src = static_cast<const Bits*>(p.src);
  Bits* dst = static_cast<Bits*>(p.dst);
  const long long step = static_cast<long long>(gridDim.x) * blockDim.x;
  for (long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.count; i += step) dst[i] = src[viewOffset(dims, i)];
}

}  // namespace kvkit

#define KVKIT_GATHER_ENTRY(bits, Bits) \
  extern "C" __global__ void __launch_bounds__(kvkit::GatherStridedLaunch::kThreads) gather_strided_b##bits(const kvkit::GatherStridedParams p) { kvkit::gatherStrided<Bits>(p); }

KVKIT_GATHER_ENTRY(8, unsigned char)
KVKIT_GATHER_ENTRY(16, unsigned short)
KVKIT_GATHER_ENTRY(32, unsigned int)
KVKIT_GATHER_ENTRY(64, unsigned long long)
