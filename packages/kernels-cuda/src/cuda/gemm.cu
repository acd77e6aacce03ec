// The materializer's projection when cuBLASLt is not available:
// C[M, N] = A[M, K] · B[N, K]^T (row-major; B is PyTorch's [out, in] weight),
// accumulated in f32 and rounded once to the storage dtype; blockIdx.z picks
// one B and C of a batch (A shared).
#include <mma.h>

#include "generated/params.cuh"
#include "storage.cuh"

namespace kvkit {

namespace tensorcore {
// Tile sizes as declared (packages/contracts/src/kernels/projection.ts); the host sizes the grid by the same ones.
constexpr int kBlockM = GemmTensorcoreLaunch::kBlockM, kBlockN = GemmTensorcoreLaunch::kBlockN, kBlockK = GemmTensorcoreLaunch::kBlockK;
static_assert(GemmTensorcoreLaunch::kThreads == 256 && kBlockM == 2 * 64 && kBlockN == 4 * 32, "the warp layout below: 2 x 4 warps of 64 x 32");
static_assert(kBlockM == kBlockN && kBlockK % 16 == 0 && kBlockM * kBlockK / 8 % 256 == 0, "A and B tiles load alike, in whole 16-byte chunks per thread");
// Rows padded by 8 elements: keeps wmma's 16-byte row alignment and spreads smem banks.
constexpr int kStride = kBlockK + 8;
constexpr int kChunks = kBlockM * kBlockK / 8 / 256;  // 16-byte chunks per thread per operand
}  // namespace tensorcore

/**
 * Tensor-core GEMM for f16 and bf16 (wmma 16x16x16, f32 accumulators).
 * 256 threads as 2 x 4 warps, each warp a 64 x 32 tile of C; K in steps of kBlockK,
 * the next step's tile loaded into registers while this one is multiplied.
 */
template <typename S, typename Element>
__device__ __forceinline__ void gemmTensorCore(const GemmParams& p) {
  using namespace nvcuda;
  using namespace tensorcore;
  __shared__ __align__(128) uint16_t tileA[2][kBlockM * kStride];
  __shared__ __align__(128) uint16_t tileB[2][kBlockN * kStride];

  const long long M = p.m, N = p.n, K = p.k;
  const long long m0 = static_cast<long long>(blockIdx.y) * kBlockM;
  const long long n0 = static_cast<long long>(blockIdx.x) * kBlockN;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int warpM = warp >> 2, warpN = warp & 3;
  const bool vectorRows = (K & 7) == 0;
  const uint16_t* a = static_cast<const uint16_t*>(p.a);
  const uint16_t* b = static_cast<const uint16_t*>(p.b) + blockIdx.z * p.batchStrideB;
  void* c = static_cast<uint16_t*>(p.c) + blockIdx.z * p.batchStrideC;

  uint4 nextA[kChunks], nextB[kChunks];
  auto fetch = [&](const uint16_t* src, long long rows, long long firstRow, long long k0, uint4 (&out)[kChunks]) {
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
      const int chunk = threadIdx.x + i * 256;
      const long long row = firstRow + chunk / (kBlockK / 8);
      const long long col = k0 + (chunk % (kBlockK / 8)) * 8;
      if (vectorRows) {
        out[i] = row < rows && col < K ? load16(src + row * K + col) : make_uint4(0, 0, 0, 0);
      } else {
        uint32_t w[4];
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const uint32_t lo = row < rows && col + 2 * e < K ? src[row * K + col + 2 * e] : 0u;
          const uint32_t hi = row < rows && col + 2 * e + 1 < K ? src[row * K + col + 2 * e + 1] : 0u;
          w[e] = lo | (hi << 16);
        }
        out[i] = make_uint4(w[0], w[1], w[2], w[3]);
      }
    }
  };
  auto stash = [&](uint16_t* tile, const uint4 (&in)[kChunks]) {
#pragma unroll
    for (int i = 0; i < kChunks; i++) {
      const int chunk = threadIdx.x + i * 256;
      store16(tile + (chunk / (kBlockK / 8)) * kStride + (chunk % (kBlockK / 8)) * 8, in[i]);
    }
  };

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 2; j++) wmma::fill_fragment(acc[i][j], 0.0f);

  const long long steps = (K + kBlockK - 1) / kBlockK;
  fetch(a, M, m0, 0, nextA);
  fetch(b, N, n0, 0, nextB);
  stash(tileA[0], nextA);
  stash(tileB[0], nextB);
  __syncthreads();
  for (long long step = 0; step < steps; step++) {
    const int cur = static_cast<int>(step & 1);
    if (step + 1 < steps) {
      fetch(a, M, m0, (step + 1) * kBlockK, nextA);
      fetch(b, N, n0, (step + 1) * kBlockK, nextB);
    }
#pragma unroll
    for (int kk = 0; kk < kBlockK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, Element, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, Element, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 4; i++)
        wmma::load_matrix_sync(fa[i], reinterpret_cast<const Element*>(tileA[cur] + (warpM * 64 + i * 16) * kStride + kk), kStride);
#pragma unroll
      for (int j = 0; j < 2; j++)
        wmma::load_matrix_sync(fb[j], reinterpret_cast<const Element*>(tileB[cur] + (warpN * 32 + j * 16) * kStride + kk), kStride);
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 2; j++) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    if (step + 1 < steps) {
      stash(tileA[cur ^ 1], nextA);
      stash(tileB[cur ^ 1], nextB);
    }
    __syncthreads();
  }

  // Each warp stages one 16x16 accumulator at a time in shared memory, then rounds and stores it.
  float* staged = reinterpret_cast<float*>(tileA[0]) + warp * 256;
#pragma unroll
  for (int i = 0; i < 4; i++) {
#pragma unroll
    for (int j = 0; j < 2; j++) {
      wmma::store_matrix_sync(staged, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
#pragma unroll
      for (int e = 0; e < 8; e++) {
        const int idx = lane * 8 + e;
        const long long row = m0 + warpM * 64 + i * 16 + idx / 16;
        const long long col = n0 + warpN * 32 + j * 16 + idx % 16;
        if (row < M && col < N) storeElement<S>(c, row * N + col, staged[idx]);
      }
      __syncwarp();
    }
  }
}

namespace simt {
constexpr int kBlock = GemmSimtLaunch::kBlockM, kStep = GemmSimtLaunch::kBlockK;
static_assert(GemmSimtLaunch::kThreads == 256 && kBlock == 16 * 4 && GemmSimtLaunch::kBlockN == kBlock, "16 x 16 threads of 4 x 4 results, square tiles");
static_assert(kBlock * kStep % 256 == 0, "each thread loads whole elements of both tiles");
}  // namespace simt

// f32 GEMM on the FMA units (no TF32: the result must match an f32 reference): kBlock x kBlock tiles, 4 x 4 per thread.
__device__ __forceinline__ void gemmF32(const GemmParams& p) {
  using namespace simt;
  __shared__ float tileA[kStep][kBlock + 4];
  __shared__ float tileB[kStep][kBlock + 4];
  const long long M = p.m, N = p.n, K = p.k;
  const long long m0 = static_cast<long long>(blockIdx.y) * kBlock;
  const long long n0 = static_cast<long long>(blockIdx.x) * kBlock;
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  const float* a = static_cast<const float*>(p.a);
  const float* b = static_cast<const float*>(p.b) + blockIdx.z * p.batchStrideB;
  float* c = static_cast<float*>(p.c) + blockIdx.z * p.batchStrideC;
  float acc[4][4] = {};
  for (long long k0 = 0; k0 < K; k0 += kStep) {
#pragma unroll
    for (int i = 0; i < kBlock * kStep / 256; i++) {
      const int e = threadIdx.x + i * 256;
      const int row = e / kStep, col = e % kStep;
      tileA[col][row] = m0 + row < M && k0 + col < K ? a[(m0 + row) * K + k0 + col] : 0.0f;
      tileB[col][row] = n0 + row < N && k0 + col < K ? b[(n0 + row) * K + k0 + col] : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kStep; kk++) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; i++) av[i] = tileA[kk][ty * 4 + i], bv[i] = tileB[kk][tx * 4 + i];
#pragma unroll
      for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; i++)
#pragma unroll
    for (int j = 0; j < 4; j++) {
      const long long row = m0 + ty * 4 + i, col = n0 + tx * 4 + j;
      if (row < M && col < N) c[row * N + col] = acc[i][j];
    }
}

}  // namespace kvkit

using kvkit::GemmParams;

extern "C" __global__ void __launch_bounds__(kvkit::GemmTensorcoreLaunch::kThreads) gemm_tensorcore_f16(const GemmParams p) { kvkit::gemmTensorCore<kvkit::F16, __half>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::GemmTensorcoreLaunch::kThreads) gemm_tensorcore_bf16(const GemmParams p) { kvkit::gemmTensorCore<kvkit::Bf16, __nv_bfloat16>(p); }
extern "C" __global__ void __launch_bounds__(kvkit::GemmSimtLaunch::kThreads) gemm_simt_f32(const GemmParams p) { kvkit::gemmF32(p); }
