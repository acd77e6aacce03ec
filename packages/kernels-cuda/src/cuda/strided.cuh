// Strided views: where element i (row-major over the view's shape) sits in its storage.
// Host and device code alike, so a host program can check the index math without a GPU.
#pragma once

#include "generated/params.cuh"

#ifdef __CUDACC__
#define KVKIT_HOST_DEVICE __host__ __device__
#else
#define KVKIT_HOST_DEVICE
#endif

namespace kvkit {

constexpr int kMaxViewRank = 8;

// A view's dims, outermost first: `rank` sizes (each >= 1) and element strides (each >= 0).
struct ViewDims {
  int rank;
  long long sizes[kMaxViewRank];
  long long strides[kMaxViewRank];
};

// Offset in elements of the view's element i, 0 <= i < the product of its sizes; 64-bit throughout.
KVKIT_HOST_DEVICE inline long long viewOffset(const ViewDims& v, long long i) {
  long long offset = 0;
#pragma unroll
  for (int d = kMaxViewRank - 1; d >= 0; d--) {
    if (d < v.rank) {
      const long long size = v.sizes[d];
      const long long outer = i / size;
      offset += (i - outer * size) * v.strides[d];
      i = outer;
    }
  }
  return offset;
}

// The dims a gather's parameter block carries (size0..size7, stride0..stride7).
KVKIT_HOST_DEVICE inline ViewDims gatherDims(const GatherStridedParams& p) {
  static_assert(kMaxViewRank == 8 && sizeof(GatherStridedParams) == 8 * (4 + 2 * kMaxViewRank), "GatherStridedParams declares size0..size7 and stride0..stride7");
  return ViewDims{
      static_cast<int>(p.rank),
      {p.size0, p.size1, p.size2, p.size3, p.size4, p.size5, p.size6, p.size7},
      {p.stride0, p.stride1, p.stride2, p.stride3, p.stride4, p.stride5, p.stride6, p.stride7},
  };
}

}  // namespace kvkit
