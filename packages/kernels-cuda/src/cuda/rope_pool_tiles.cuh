// ropePoolFused's launch for rows of one 16-byte vector per lane, into pools of any layout and
// dtype: a block takes a tile of consecutive tokens, computes each (token, pair) cos/sin once
// into shared memory, then its lane groups stream the tile's rows with several rows in flight.
// Included by rope_pool.cu, which defines settledPoolRow, inputStrides and positionStreams.
#pragma once
#include "bad_values.cuh"
#include "grid_order.cuh"
#include "kv_pool.cuh"
#include "qk_norm.cuh"
#include "rope.cuh"
#include "staged_rows.cuh"
#include "storage.cuh"
#include "value_rules.cuh"

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
 * the registers fp8 stores take freed. PAIRED (neox over the whole row, the
 * host's lanesPerRow half the row's vectors): a lane holds a vector of the
 * row's first half and its rotation partner R/2 elements on, so the rotation
 * needs no shuffle, the pair shares one read of its cos/sin, and a lane's
 * bookkeeping per row covers 32 bytes instead of 16.
 */
template <typename S, int DEPTH, int STAGES, bool FP8_POOLS, bool PAIRED>
__device__ __forceinline__ void ropePoolTiles(const RopePoolParams& p) {
  // A one-launch call (its own rules, no check or claims ahead) overlaps the grid ahead, whatever it is: the block
  // waits for it before it reads anything.
  if (testsOwnRules(p)) waitForPreviousGrid();
  // Its rules first, while few registers are live: a call that breaks one writes nothing.
  if (blockFindsBadValue(p)) return;
  constexpr int NV = PAIRED ? 2 : 1;  // vectors a lane holds of each row
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
  // Shared memory: the staged rows [STAGES][DEPTH][NV][blockDim.x], the Q- and K-norm weights as f32 [2][D], the tile's
  // cos/sin [tokensPerBlock][layout.perToken], its slots.
  extern __shared__ float4 tileShared[];
  uint4* staged = reinterpret_cast<uint4*>(tileShared);
  float* tileWeights = reinterpret_cast<float*>(staged + STAGES * DEPTH * NV * blockDim.x);
  float2* tileCosSin = reinterpret_cast<float2*>(tileWeights + 2 * D);
  long long* tileSlots = reinterpret_cast<long long*>(tileCosSin + p.tokensPerBlock * layout.perToken);

  // This lane's vector of a row (paired: and its partner, `halfR` elements on), and where its pairs' angles sit.
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
    uint4* stage = staged + (issued % STAGES) * DEPTH * NV * blockDim.x + threadIdx.x;
#pragma unroll
    for (int d = 0; d < DEPTH; d++) {
      const bool here = issueAt.token < tokens && inRow;
      const char* row = here ? rowSource(keyPart, firstToken + issueAt.token, issueAt.head) + first * kElementBytes : static_cast<const char*>(p.q);
#pragma unroll
      for (int v = 0; v < NV; v++) stageOnce16(stage + (d * NV + v) * blockDim.x, here ? row + v * halfR * kElementBytes : row, here, policy);
      issueAt.advance(groups, keyPart ? 2 * H : Hq);
    }
    issued++;
  };
#pragma unroll
  for (int b = 0; b + 1 < STAGES; b++) {
    if (b < batches) stageNextBatch();
    closeStagedBatch();
  }

  // Without claims, the block looks for later tokens of the call naming each tile token's slot, while its first rows load.
  if (p.inlineOwners != 0) {
    // A thread a token of the call (the host keeps such calls to at most a block's threads), each tile token's slot against it.
    const int n = static_cast<int>(p.numTokens);
    const int tileFirst = static_cast<int>(firstToken);
    const long long mine = threadIdx.x < n ? loadIndex(p.slots, p.slotsAreI64, threadIdx.x) : -1;
    if (threadIdx.x >= tileFirst && threadIdx.x < tileFirst + tokens) tileSlots[threadIdx.x - tileFirst] = mine;
    __syncthreads();
#pragma unroll 1
    for (int t = 0; t < tokens; t++)
      if (__syncthreads_or(static_cast<int>(threadIdx.x) > tileFirst + t && mine == tileSlots[t]) && threadIdx.x == 0) tileSlots[t] = -1;
  }

  // The tile's slots, as given, read now (a thread a token: tokensPerBlock <= 8) and kept in shared memory until they are
  // settled before the key rows: the block's wait there is then only the claims'.
  if (p.inlineOwners == 0 && threadIdx.x < tokens) tileSlots[threadIdx.x] = loadIndex(p.slots, p.slotsAreI64, firstToken + threadIdx.x);

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
  // Nothing written yet: the grids this one was launched beside end here, and a call they rejected stops (a one-launch
  // call's verdict is the block's own, above).
  waitForPreviousGrid();
  if (!testsOwnRules(p) && callRejected(p.badValue, p.call)) {
    waitStagedBatches<0>();
    return;
  }

  // One row's values: normed (where `normed`, by `weights`), rotated over R, packed back. Every lane of the warp calls it.
  // Paired: the lanes of this thread's row (its group), the only ones its norm's shuffles need.
  const unsigned groupMask = (lanes == 32 ? kFullWarp : (1u << lanes) - 1u) << ((threadIdx.x & 31) & ~(lanes - 1));
  auto rotate = [&](uint4 (&bits)[NV], int t, bool normed, const float* weights) {
    if constexpr (PAIRED) {
      // Called by whole groups (normed the same across one): no shuffle partner is needed, the norm's sums stay in the group.
      float x[2][VEC];
      unpack16<S>(bits[0], x[0]);
      unpack16<S>(bits[1], x[1]);
      if (normed) {
        // The unpaired lanes' order of sums: each vector's squares, the pair (their first shuffle), then the rest.
        float halves[2] = {0.0f, 0.0f};
#pragma unroll
        for (int v = 0; v < 2; v++)
#pragma unroll
          for (int u = 0; u < VEC; u++) halves[v] = fmaf(x[v][u], x[v][u], halves[v]);
        const float inv = rsqrtf(sumOverLanes(halves[0] + halves[1], lanes, groupMask) / static_cast<float>(D) + eps);
#pragma unroll
        for (int v = 0; v < 2; v++)
#pragma unroll
          for (int part = 0; part < VEC / 4; part++) {
            const float4 four = reinterpret_cast<const float4*>(weights + first + v * halfR)[part];
            const float wf[4] = {four.x, four.y, four.z, four.w};
#pragma unroll
            for (int u = 0; u < 4; u++) x[v][4 * part + u] = x[v][4 * part + u] * inv * wf[u];
          }
      }
      const float4* angles = reinterpret_cast<const float4*>(tileCosSin + t * layout.perToken) + lane;
#pragma unroll
      for (int u = 0; u < VEC; u++) {
        const float4 a = angles[(u >> 1) * layout.vectors];
        const float c = (u & 1) ? a.z : a.x, sn = (u & 1) ? a.w : a.y;
        const float lower = x[0][u], upper = x[1][u];
        x[0][u] = rotatedElement(lower, upper, c, -sn);
        x[1][u] = rotatedElement(upper, lower, c, sn);
      }
      bits[0] = pack16<S>(x[0]);
      bits[1] = pack16<S>(x[1]);
      return;
    }
    float x[1][VEC];
    unpack16<S>(bits[0], x[0]);
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
    bits[0] = pack16<S>(x[0]);
  };

  // A query row: rotated into qRot.
  auto useQuery = [&](uint4 (&bits)[NV], bool live, int t, int head) {
    rotate(bits, t, qNormed, tileWeights);
    if (!live || !inRow) return;
    char* out = outputRow(p.qRot, Hq, t, head);
#pragma unroll
    for (int v = 0; v < NV; v++) storeOnce16(out + v * halfR * kElementBytes, bits[v]);
  };
  // A key row (heads [0, H): rotated into kRot and the K pool) or a value row ([H, 2H): to the V pool as loaded).
  const long long poolHeadElements = poolHeadStrideOf(p);
  auto useKeyOrValue = [&](uint4 (&bits)[NV], bool live, int t, int head) {
    const bool key = head < H;
    uint4 out[NV];
    if constexpr (PAIRED) {
      // A group's rows are all keys or all values: only key groups rotate, in place.
      if (key) rotate(bits, t, kNormed, tileWeights + D);
#pragma unroll
      for (int v = 0; v < NV; v++) out[v] = bits[v];
    } else {
      out[0] = bits[0];
      if (__any_sync(kFullWarp, key)) {
        rotate(bits, t, key && kNormed, tileWeights + D);
        if (key) out[0] = bits[0];
      }
    }
    if (!live || !inRow) return;
    if (key) {
      char* rotated = outputRow(p.kRot, H, t, head);
#pragma unroll
      for (int v = 0; v < NV; v++) storeOnce16(rotated + v * halfR * kElementBytes, out[v]);
    }
    const long long slotFirst = tileSlots[t];
    if (slotFirst < 0) return;
    // K rows as rotated and rounded, V rows as loaded: their bits, or fp8 codes (kv_pool.cuh).
    const int poolHead = key ? head : head - H;
    const PoolTarget pool = poolTarget<RopePoolParams, FP8_POOLS>(p, key ? p.kPool : p.vPool, !key, poolHead);
#pragma unroll
    for (int v = 0; v < NV; v++) storePoolVector<S, FP8_POOLS>(pool, slotFirst + poolHead * poolHeadElements + first + v * halfR, out[v]);
  };

  TileRows useAt(group, Hq);
  for (int b = 0; b < batches; b++) {
    if (issued < batches) stageNextBatch();
    closeStagedBatch();
    waitStagedBatches<STAGES - 1>();
    const bool keyPart = b >= queryBatches;
    if (b == queryBatches) {
      // Each token's slot as its head-0 row in the pools (poolSlotOf), -1: none; one division per slot, not per row.
      if (threadIdx.x < tokens) {
        const long long slot = settledPoolRow(p, firstToken + threadIdx.x, tileSlots[threadIdx.x]);
        tileSlots[threadIdx.x] = slot >= 0 ? poolSlotOf(p, slot) : -1;
      }
      __syncthreads();
      useAt = TileRows(group, 2 * H);
    }
    const uint4* stage = staged + (b % STAGES) * DEPTH * NV * blockDim.x + threadIdx.x;
    // One copy of each use: the batch's rows in turn.
#pragma unroll 1
    for (int d = 0; d < DEPTH; d++) {
      uint4 bits[NV];
#pragma unroll
      for (int v = 0; v < NV; v++) bits[v] = stage[(d * NV + v) * blockDim.x];
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
