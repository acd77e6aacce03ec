// Kernel parameter blocks. Every field is 8 bytes, in this order: the host
// writes them field by field from src/runtime/params.ts (a test compares the
// two lists), so host and device agree by construction.
#pragma once

namespace kvkit {

// The first value outside its range that any kernel met since the last sync.
// key = (check << 32) | token, so the earliest check, then the earliest token, wins.
struct BadValueRecord {
  unsigned long long key;
  long long value;
  int lock;
  int unused;
};

// One entry of the open-addressing table that picks, per slot named in a call,
// the last token naming it: key = (generation << 40) | slot, owner = (generation << 40) | token.
struct SlotOwner {
  unsigned long long key;
  unsigned long long owner;
};

// Fills the slot-owner table for one call, before the kernel that writes the pools.
struct ClaimSlotsParams {
  const void* slots;              // [N]
  SlotOwner* slotOwners;
  long long numTokens;
  long long slotsAreI64;
  long long slotBelow;
  long long slotOwnersMask;
  long long generation;
};

struct FusedNormRopeParams {
  const void* kv;                 // K row (t, l, h) at t*kvTokenStride + l*kvLayerStride + h*D; its V row vOffset later
  const void* kNormWeight;        // [L, D], kv's dtype or f32
  const float* eps;               // [L]
  const void* cosSinCache;        // [P, R]; null: angles from ropeFrequencies
  const float* ropeFrequencies;   // [R/2]
  const void* positions;          // [T]
  const void* slots;              // [T] or null (token t writes row t)
  void* kOut;                     // row (l, row, h) at l*outLayerStride + (row*H + h)*D; may be kv itself (in place)
  void* vOut;                     // laid out as kOut; null: V is not copied
  BadValueRecord* badValue;
  long long numTokens;            // T
  long long numLayers;            // L
  long long numKvHeads;           // H
  long long headDim;              // D
  long long rotaryDim;            // R
  long long kvTokenStride;        // elements
  long long kvLayerStride;
  long long vOffset;
  long long outLayerStride;
  long long gptj;                 // 0: neox pairs (j, j + R/2); 1: gptj pairs (2j, 2j + 1)
  long long weightIsF32;
  long long cacheDType;           // FloatCode
  long long cacheVectors;         // 1: an f32 cache whose runs of a lane's cos (and sin) are read 16 bytes at a time
  long long positionsAreI64;
  long long slotsAreI64;
  long long positionMin;
  long long positionBelow;
  long long positionCheck;        // check number for BadValueRecord.key
  long long slotBelow;
  long long slotCheck;
  SlotOwner* slotOwners;          // winners of duplicate slots, or null (see claim_slots)
  long long slotOwnersMask;       // table capacity - 1
  long long generation;
  long long rowsPerUnit;          // head rows (of a token's L*H) per unit of work
  long long unitsPerToken;        // ceil(L*H / rowsPerUnit)
  long long lanesPerRow;          // power of two <= 32
};

struct RopePoolParams {
  const void* q;                  // [N, Hq, D]
  const void* k;                  // [N, H, D]
  const void* v;                  // [N, H, D]
  const float* ropeFrequencies;   // [R/2]
  const void* positions;          // [N]
  const void* slots;              // [N]
  void* qRot;                     // [N, Hq, D]
  void* kRot;                     // [N, H, D]
  void* kPool;                    // [S, H, D]
  void* vPool;                    // [S, H, D]
  BadValueRecord* badValue;
  long long numTokens;            // N
  long long numQoHeads;           // Hq
  long long numKvHeads;           // H
  long long headDim;              // D
  long long rotaryDim;            // R
  long long gptj;
  long long positionsAreI64;
  long long slotsAreI64;
  long long slotBelow;            // S
  long long slotCheck;
  SlotOwner* slotOwners;
  long long slotOwnersMask;
  long long generation;
  long long rowsPerUnit;          // of the Hq + 2*H rows of one token (q heads, k heads, v heads)
  long long unitsPerToken;
  long long lanesPerRow;
};

// C[M, N] = A[M, K] · B[N, K]^T, all row-major, f32 accumulation; blockIdx.z
// picks one of a batch of B and C (A shared), `batchStride*` elements apart.
struct GemmParams {
  const void* a;
  const void* b;
  void* c;
  long long m;
  long long n;
  long long k;
  long long batchStrideB;
  long long batchStrideC;
};

struct CopyParams {
  const void* src;
  void* dst;
  long long vectors;              // 16-byte vectors
};

struct SpinParams {
  long long nanoseconds;
};

struct FillParams {
  void* data;
  long long count;
  long long seed;
  double scale;                   // values are uniform in [-scale, scale)
};

}  // namespace kvkit
