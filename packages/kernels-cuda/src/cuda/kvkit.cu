// The one translation unit nvcc builds into dist/kvkit.fatbin: every op's kernels.
#include "claim_slots.cu"
#include "fused_norm_rope.cu"
#include "gather_strided.cu"
#include "gemm.cu"
#include "halves.cu"
#include "profiling.cu"
#include "pool_read.cu"
#include "rope_pool.cu"
