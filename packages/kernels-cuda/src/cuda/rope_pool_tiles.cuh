// ropePoolFused's launch for rows of one 16-byte vector per lane, into pools of any layout and
// dtype: a block takes a tile of consecutive tokens, computes each (token, pair) cos/sin once
// into shared memory, then its lane groups stream the tile's rows with several rows in flight.
// Included by rope_pool.cu, which defines poolRow, inputStrides and positionStreams.
#pragma once
#include "bad_values.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "qk_norm.cuh"
#include "rope.cuh"
#include "staged_rows.cuh"
#include "storage.cuh"

namespace kvkit {

// Rows [0, tokens * heads) of a tile, token-major, group g taking rows g, g + groups, ...: (token, head) kept incrementally.
struct TileRows {
  int token, head;
  __device__ __forceinline__ TileRows(int first, int heads) : token(first / heads), head(first - (first / heads) * heads) {}
  __device__ __forceinline__ void advance(int by, int heads) {
    head += by;
    while (head >= heads) head -= heads, token++;
  }
};

/**
 * Where a tile keeps a token's cos/sin: laid out so that the lanes of a row
 * read them as float4s at consecutive addresses (no bank conflicts), two
 * elements' pairs per float4. Element u of lane v's vector (neox: pair
 * j = v*VEC + u of its half; gptj: pair j = v*VEC/2 + m, m = u/2) sits in
 * float2 slot (u/2 or m/2, then v) * 2 + (u or m) % 2.
 */
template <int VEC>
struct TileAngles {
  int perToken;    // float2 slots per token (even: tokens start on 16 bytes)
  int vectors;     // v's per slot row: R/2 / VEC (neox), ceil(R/2 / (VEC/2)) (gptj)
  bool gptj;

  __device__ __forceinline__ TileAngles(int R, bool gptjIn) : gptj(gptjIn) {
    const int halfR = R >> 1;
    vectors = gptj ? (halfR + VEC / 2 - 1) / (VEC / 2) : halfR / VEC;
    perToken = vectors * (gptj ? VEC / 2 : VEC);
  }

  __device__ __forceinline__ int slotOf(int j) const {
    const int per = gptj ? VEC / 2 : VEC;
    const int v = j / per, u = j - v * per;
    return ((u >> 1) * vectors + v) * 2 + (u & 1);
  }
};

/**
 * Token tiles: block b takes tokens [b*T, b*T + T) (T = tokensPerBlock).
 * Its lane groups walk the tile's query rows, then its key and value rows,
 * in batches of DEPTH rows a group, STAGES - 1 batches loading (into shared
 * memory, staged_rows.cuh) while one is worked on: the first before the
 * block computes the tile's cos/sin, the first key batches while it works on
 * the last query rows. Only then does it wait for the grids it was launched
 * beside (the value check, claim_slots) and read the check's verdict, so
 * their time hides under its first loads. Before its first key rows the
 * block settles the tile's slots.
 * (Loads held in registers instead left the next batch unstarted while a
 * group worked on this one: with 16-bit rows, whose arithmetic per byte is
 * twice f32's, bf16 reached 75% of the copy where f32 reached 89%.) Every
 * group walks the same number of batches (a group past its rows idles
 * through them), so every shuffle is the whole warp's and the barrier the
 * whole block's. The arithmetic is the other paths', in the same order, so
 * all give the same bits. FP8_POOLS: built for fp8 pools too
 * (rope_pool_*_nv1_fp8); without, for pools of the model dtype alone, with
 * the registers fp8 stores take freed.
 */
template <typename S, int DEPTH, int STAGES, bool FP8_POOLS>
__device__ __forceinline__ void ropePoolTiles(const RopePoolParams& p) {
  constexpr int VEC = S::kPer16;
  constexpr long long kElementBytes = sizeof(typename S::Bits);
  const int lanes = static_cast<int>(p.lanesPerRow);
  const int lane = threadIdx.x & (lanes - 1);
  const int group = threadIdx.x / lanes;
  const int groups = blockDim.x / lanes;
  const int Hq = static_cast<int>(p.numQoHeads), H = static_cast<int>(p.numKvHeads), D = static_cast<int>(p.headDim), R = static_cast<int>(p.rotaryDim);
  const int halfR = R >> 1;
  const bool gptj = p.gptj != 0;
  const long long firstToken = static_cast<long long>(blockIdx.x) * p.tokensPerBlock;
  const int tokens = static_cast<int>(min(p.tokensPerBlock, p.numTokens - firstToken));
  const TileAngles<VEC> layout(R, gptj);
  // Shared memory: the staged rows [STAGES][DEPTH][blockDim.x], the Q- and K-norm weights as f32 [2][D], the tile's
  // cos/sin [tokensPerBlock][layout.perToken], its slots.
  extern __shared__ float4 tileShared[];
  uint4* staged = reinterpret_cast<uint4*>(tileShared);
  float* tileWeights = reinterpret_cast<float*>(staged + STAGES * DEPTH * blockDim.x);
  float2* tileCosSin = reinterpret_cast<float2*>(tileWeights + 2 * D);
  long long* tileSlots = reinterpret_cast<long long*>(tileCosSin + p.tokensPerBlock * layout.perToken);

  // This lane's vector of a row, and where its pairs' angles sit.
  const int first = lane * VEC;
  const bool inRow = first < D;
  const bool rotates = first < R;
  // Every element of the vector rotates (always so for neox, whose R/2 is a whole number of vectors).
  const bool rotatesWhole = first + VEC <= R;
  const bool firstHalf = first < halfR;
  const int offsetVec = halfR / VEC;
  const int partnerLane = lane < offsetVec ? lane + offsetVec : lane - offsetVec;
  const int angleVector = gptj || firstHalf ? lane : lane - offsetVec;
  const float eps = static_cast<float>(p.normEps);

  // Where the rows start: query rows are heads [0, Hq) of a token; in the key part heads [0, H) are k's, [H, 2H) v's.
  auto inputRow = [&](int kind) {
    const RowStrides in = inputStrides(p, kind);
    const char* base = static_cast<const char*>(inputBase(p, kind));
    return [=](long long n, int head) { return base + (n * in.token + static_cast<long long>(head) * in.head) * kElementBytes; };
  };
  const auto queries = inputRow(0), keys = inputRow(1), values = inputRow(2);
  auto rowSource = [&](bool keyPart, long long n, int head) { return !keyPart ? queries(n, head) : head < H ? keys(n, head) : values(n, head - H); };
  // This lane's vector of row (t, head) of a dense [N, heads, D] output: the tile's first row, then 32-bit row
  // arithmetic (a tile's rows, t * heads + head, number fewer than the launch's 2^31).
  auto outputRow = [&](void* out, int heads, int t, int head) {
    char* tile = static_cast<char*>(out) + (firstToken * heads * D + first) * kElementBytes;
    return tile + static_cast<long long>(t * heads + head) * (D * kElementBytes);
  };

  // Batches of each part, the same for every group: group g takes rows g, g + groups, ... of the part's tokens * heads.
  auto batchesOf = [&](int rows) { return ((rows + groups - 1) / groups + DEPTH - 1) / DEPTH; };
  const int queryBatches = batchesOf(tokens * Hq);
  const int batches = queryBatches + (H == 0 ? 0 : batchesOf(tokens * 2 * H));

  // Starts the next batch's copies into its stage.
  const uint64_t policy = evictFirstPolicy();
  int issued = 0;
  TileRows issueAt(group, Hq);
  auto stageNextBatch = [&]() {
    const bool keyPart = issued >= queryBatches;
    if (issued == queryBatches) issueAt = TileRows(group, 2 * H);
    uint4* stage = staged + (issued % STAGES) * DEPTH * blockDim.x + threadIdx.x;
#pragma unroll
    for (int d = 0; d < DEPTH; d++) {
      const bool here = issueAt.token < tokens && inRow;
      stageOnce16(stage + d * blockDim.x, here ? rowSource(keyPart, firstToken + issueAt.token, issueAt.head) + first * kElementBytes : p.q, here, policy);
      issueAt.advance(groups, keyPart ? 2 * H : Hq);
    }
    issued++;
  };
#pragma unroll
  for (int b = 0; b + 1 < STAGES; b++) {
    if (b < batches) stageNextBatch();
    closeStagedBatch();
  }

  // Every (token, pair) cos/sin of the tile, and the norm weights, once, while the first rows load.
  const bool qNormed = p.qNormWeight != nullptr, kNormed = p.kNormWeight != nullptr;
  {
    for (int i = threadIdx.x; i < D; i += blockDim.x) {
      if (qNormed) tileWeights[i] = normWeightAt<S>(p.qNormWeight, p.qNormWeightIsF32 != 0, i);
      if (kNormed) tileWeights[D + i] = normWeightAt<S>(p.kNormWeight, p.kNormWeightIsF32 != 0, i);
    }
    const PositionStreams streams = positionStreams(p);
    const unsigned* table = static_cast<const unsigned*>(p.ropeAngles);
    for (int i = threadIdx.x; i < tokens * halfR; i += blockDim.x) {
      const int t = i / halfR, j = i - t * halfR;
      float c, s;
      ropeCosSin(streams.at(firstToken + t, j), j, table, c, s);
      tileCosSin[t * layout.perToken + layout.slotOf(j)] = make_float2(c, s);
    }
    __syncthreads();
  }
  // Nothing written yet: the grids this one was launched beside end here, and a call they rejected stops.
  waitForPreviousGrid();
  if (callRejected(p.badValue, p.call)) {
    waitStagedBatches<0>();
    return;
  }

  // One row's values: normed (where `normed`, by `weights`), rotated over R, packed back. Every lane of the warp calls it.
  auto rotate = [&](const uint4& bits, int t, bool normed, const float* weights) -> uint4 {
    float x[1][VEC];
    unpack16<S>(bits, x[0]);
    if (__any_sync(kFullWarp, normed)) normVectorInLanes<S>(x, normed && inRow, weights + first, eps, lanes, D);
    float partner[VEC];
#pragma unroll
    for (int u = 0; u < VEC; u++) {
      // Shuffled for gptj rows too (the warp's lanes stay together, with no branch around each shuffle).
      const float across = __shfl_sync(kFullWarp, x[0][u], partnerLane, lanes);
      partner[u] = gptj ? x[0][u ^ 1] : across;
    }
    const float4* angles = reinterpret_cast<const float4*>(tileCosSin + t * layout.perToken) + angleVector;
    auto rotateElement = [&](int u) {
      const int m = gptj ? u >> 1 : u;
      const float4 a = angles[(m >> 1) * layout.vectors];
      const float c = (m & 1) ? a.z : a.x, sn = (m & 1) ? a.w : a.y;
      const bool firstOfPair = gptj ? (u & 1) == 0 : firstHalf;
      x[0][u] = rotatedElement(x[0][u], partner[u], c, firstOfPair ? -sn : sn);
    };
    if (rotatesWhole) {
#pragma unroll
      for (int u = 0; u < VEC; u++) rotateElement(u);
    } else if (rotates) {
#pragma unroll
      for (int u = 0; u < VEC; u++)
        if (first + u < R) rotateElement(u);
    }
    return pack16<S>(x[0]);
  };

  // A query row: rotated into qRot.
  auto useQuery = [&](const uint4& bits, bool live, int t, int head) {
    const uint4 out = rotate(bits, t, qNormed, tileWeights);
    if (live && inRow) storeOnce16(outputRow(p.qRot, Hq, t, head), out);
  };
  // A key row (heads [0, H): rotated into kRot and the K pool) or a value row ([H, 2H): to the V pool as loaded).
  const long long poolHeadElements = poolHeadStrideOf(p);
  auto useKeyOrValue = [&](const uint4& bits, bool live, int t, int head) {
    const bool key = head < H;
    uint4 out = bits;
    if (__any_sync(kFullWarp, key)) {
      const uint4 rotated = rotate(bits, t, key && kNormed, tileWeights + D);
      if (key) out = rotated;
    }
    if (!live || !inRow) return;
    if (key) storeOnce16(outputRow(p.kRot, H, t, head), out);
    const long long slotFirst = tileSlots[t];
    if (slotFirst < 0) return;
    // K rows as rotated and rounded, V rows as loaded: their bits, or fp8 codes (kv_pool.cuh).
    const int poolHead = key ? head : head - H;
    storePoolVector<S, FP8_POOLS>(poolTarget<RopePoolParams, FP8_POOLS>(p, key ? p.kPool : p.vPool, !key, poolHead), slotFirst + poolHead * poolHeadElements + first, out);
  };

  TileRows useAt(group, Hq);
  for (int b = 0; b < batches; b++) {
    if (issued < batches) stageNextBatch();
    closeStagedBatch();
    waitStagedBatches<STAGES - 1>();
    const bool keyPart = b >= queryBatches;
    if (b == queryBatches) {
      // Each token's slot as its head-0 row in the pools (poolSlotOf), -1: none; one division per slot, not per row.
      for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
        const long long slot = poolRow(p, firstToken + t);
        tileSlots[t] = slot >= 0 ? poolSlotOf(p, slot) : -1;
      }
      __syncthreads();
      useAt = TileRows(group, 2 * H);
    }
    const uint4* stage = staged + (b % STAGES) * DEPTH * blockDim.x + threadIdx.x;
    // One copy of each use: the batch's rows in turn.
#pragma unroll 1
    for (int d = 0; d < DEPTH; d++) {
      const uint4 bits = stage[d * blockDim.x];
      const bool live = useAt.token < tokens;
      const int t = min(useAt.token, tokens - 1);
      if (keyPart) {
        useKeyOrValue(bits, live, t, useAt.head);
      } else {
        useQuery(bits, live, t, useAt.head);
      }
      useAt.advance(groups, keyPart ? 2 * H : Hq);
    }
  }
}

}  // namespace kvkit
