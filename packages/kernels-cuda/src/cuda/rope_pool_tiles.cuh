// ropePoolFused's launch for rows of one 16-byte vector per lane, into pools of any layout and
// dtype: a block takes a tile of consecutive tokens, computes each (token, pair) cos/sin once
// into shared memory, then its lane groups stream the tile's rows with several rows in flight.
// Included by rope_pool.cu, which defines poolRow, inputStrides and positionStreams.
#pragma once
#include "kv_pool.cuh"
#include "qk_norm.cuh"
#include "rope.cuh"
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
 * Its threads fill the tile's cos/sin, then lane groups stream the query
 * rows, DEPTH rows loaded before any is used; then the tile's slots are
 * settled (on Hopper this waits for claim_slots, by now long done) and the
 * key and value rows follow the same way. (Overlapping the cos/sin and the
 * slots with the first loads measured slower on the H200, 267 against 255 µs
 * at N = 32768: it needs more than the 64 registers that four blocks a
 * multiprocessor leave.) A warp's groups walk in step (a group past its rows
 * idles through them), so every shuffle is the whole warp's. The arithmetic
 * is the other paths', in the same order, so all give the same bits.
 * FP8_POOLS: built for fp8 pools too (rope_pool_*_nv1_fp8); without, for
 * pools of the model dtype alone, with the registers fp8 stores take freed.
 */
template <typename S, int DEPTH, bool FP8_POOLS>
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
  extern __shared__ float4 tileShared[];
  float2* tileCosSin = reinterpret_cast<float2*>(tileShared);  // [tokensPerBlock][layout.perToken]
  long long* tileSlots = reinterpret_cast<long long*>(tileCosSin + p.tokensPerBlock * layout.perToken);

  // Every (token, pair) cos/sin of the tile, once.
  {
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

  // This lane's vector of a row, and where its pairs' angles sit.
  const int first = lane * VEC;
  const bool inRow = first < D;
  const bool rotates = first < R;
  const bool firstHalf = first < halfR;
  const int offsetVec = halfR / VEC;
  const int partnerLane = lane < offsetVec ? lane + offsetVec : lane - offsetVec;
  const int angleVector = gptj || firstHalf ? lane : lane - offsetVec;
  const float eps = static_cast<float>(p.normEps);

  // One row's values: normed (where `normed`), rotated over R, packed back. Every lane of the warp calls it.
  auto rotate = [&](const uint4& bits, int t, bool normed, const void* weight, bool weightIsF32) -> uint4 {
    float x[1][VEC];
    unpack16<S>(bits, x[0]);
    if (__any_sync(kFullWarp, normed)) normRowInLanes<S, 1>(x, normed, weight, weightIsF32, eps, lane, lanes, D);
    float partner[VEC];
#pragma unroll
    for (int u = 0; u < VEC; u++) partner[u] = gptj ? x[0][u ^ 1] : __shfl_sync(kFullWarp, x[0][u], partnerLane, lanes);
    if (rotates) {
      const float4* angles = reinterpret_cast<const float4*>(tileCosSin + t * layout.perToken) + angleVector;
#pragma unroll
      for (int u = 0; u < VEC; u++) {
        if (first + u >= R) continue;
        const int m = gptj ? u >> 1 : u;
        const float4 a = angles[(m >> 1) * layout.vectors];
        const float c = (m & 1) ? a.z : a.x, sn = (m & 1) ? a.w : a.y;
        const bool firstOfPair = gptj ? (u & 1) == 0 : firstHalf;
        x[0][u] = rotatedElement(x[0][u], partner[u], c, firstOfPair ? -sn : sn);
      }
    }
    return pack16<S>(x[0]);
  };

  // Streams rows [0, tokens * heads) of one tensor kind, the warp's groups in step: DEPTH loads in flight, then each row used.
  auto stream = [&](int heads, auto&& source, auto&& use) {
    TileRows at(group, heads);
    while (__any_sync(kFullWarp, at.token < tokens)) {
      uint4 bits[DEPTH];
      TileRows row = at;
#pragma unroll
      for (int d = 0; d < DEPTH; d++) {
        bits[d] = at.token < tokens && inRow ? loadOnce16(source(firstToken + at.token, at.head) + first * kElementBytes) : make_uint4(0, 0, 0, 0);
        at.advance(groups, heads);
      }
      // The same rows again, walked the same way (cheaper than holding DEPTH positions in registers), each
      // taken from the front as the rest move up: one copy of `use` and no dynamically indexed array.
#pragma unroll 1
      for (int d = 0; d < DEPTH; d++) {
        use(bits[0], row.token < tokens, min(row.token, tokens - 1), row.head);
        row.advance(groups, heads);
#pragma unroll
        for (int e = 0; e + 1 < DEPTH; e++) bits[e] = bits[e + 1];
      }
    }
  };
  auto inputRow = [&](int kind) {
    const RowStrides in = inputStrides(p, kind);
    const char* base = static_cast<const char*>(inputBase(p, kind));
    return [=](long long n, int head) { return base + (n * in.token + static_cast<long long>(head) * in.head) * kElementBytes; };
  };
  auto outputRow = [&](void* out, int heads, long long n, int head) { return static_cast<char*>(out) + ((n * heads + head) * D + first) * kElementBytes; };

  const bool qNormed = p.qNormWeight != nullptr, kNormed = p.kNormWeight != nullptr;
  const bool qWeightIsF32 = p.qNormWeightIsF32 != 0, kWeightIsF32 = p.kNormWeightIsF32 != 0;
  stream(Hq, inputRow(0), [&](const uint4& bits, bool live, int t, int head) {
    const uint4 out = rotate(bits, t, qNormed, p.qNormWeight, qWeightIsF32);
    if (live && inRow) storeOnce16(outputRow(p.qRot, Hq, firstToken + t, head), out);
  });
  if (H == 0) return;

  // Key rows then value rows of each token: heads [0, H) rotate into kRot and the K pool, [H, 2H) go to the V pool.
  const auto keys = inputRow(1), values = inputRow(2);
  // Each token's slot as its head-0 row in the pools (poolSlotOf), -1: none; one division per slot, not per row.
  for (int t = threadIdx.x; t < tokens; t += blockDim.x) {
    const long long slot = poolRow(p, firstToken + t, true);
    tileSlots[t] = slot >= 0 ? poolSlotOf(p, slot) : -1;
  }
  __syncthreads();
  const long long poolHeadElements = poolHeadStrideOf(p);
  stream(
      2 * H, [&](long long n, int head) { return head < H ? keys(n, head) : values(n, head - H); },
      [&](const uint4& bits, bool live, int t, int head) {
        const bool key = head < H;
        uint4 out = bits;
        if (__any_sync(kFullWarp, key)) {
          const uint4 rotated = rotate(bits, t, key && kNormed, p.kNormWeight, kWeightIsF32);
          if (key) out = rotated;
        }
        if (!live || !inRow) return;
        if (key) storeOnce16(outputRow(p.kRot, H, firstToken + t, head), out);
        const long long slotFirst = tileSlots[t];
        if (slotFirst < 0) return;
        // K rows as rotated and rounded, V rows as loaded: their bits, or fp8 codes (kv_pool.cuh).
        const int poolHead = key ? head : head - H;
        storePoolVector<S, FP8_POOLS>(poolTarget<RopePoolParams, FP8_POOLS>(p, key ? p.kPool : p.vPool, !key, poolHead), slotFirst + poolHead * poolHeadElements + first, out);
      });
}

}  // namespace kvkit
