/** How the materializer orders its projection and its norm + RoPE (README, "KvMaterializer": the schedules). */
export type MaterializerSchedule = 'batched' | 'overlapped';

/** Every schedule `tuning.materializerSchedule` takes, so a benchmark can time each in one run. */
export const MATERIALIZER_SCHEDULES: readonly MaterializerSchedule[] = ['batched', 'overlapped'];

/**
 * Internal scheduling choices, read at every call, in one object so a
 * benchmark can time each variant in one run (`@kvkit/kernels-cuda/profiling`
 * re-exports it). Not part of the API: defaults change as measurements say.
 */
export const tuning: {
  materializerSchedule: MaterializerSchedule;
  overlapLayersPerStage: number;
  overlapMinTokens: number;
  overlapNormMultiprocessors: number;
  mlaTokensPerBlock: number;
  oneLaunchMostTokens: number;
} = {
  /**
   * 'batched': all L layers' projection as one strided-batched GEMM, then one norm + RoPE launch over every layer.
   * 'overlapped': the layers in stages (a GEMM each on the main stream), each stage's norm + RoPE on a second
   * stream once its GEMM is done, so it runs beside the next stage's GEMM; the main stream waits for the last one.
   */
  materializerSchedule: 'batched',
  /** Layers per stage of the overlapped schedule: the last stage's norm is what stays exposed (fewer layers, less of it). */
  overlapLayersPerStage: 1,
  /** Calls of fewer tokens stay batched: a short GEMM hides little, and each stage adds a GEMM launch and two events (not measured yet). */
  overlapMinTokens: 2048,
  /**
   * 0: each norm + RoPE launch is sized for the whole device, and the GEMMs beside them for every multiprocessor.
   * k > 0: the GEMMs that run beside a norm take cuBLASLt's algorithms for all but k multiprocessors (its SM count
   * target) and those norms a grid for k, so the norm has multiprocessors of its own (the last stage's norm, with no
   * GEMM beside it, still takes the whole device).
   */
  overlapNormMultiprocessors: 0,
  /** Tokens a block of mlaPoolFused's vector path takes at most (fewer where the grid would leave multiprocessors short of blocks). */
  mlaTokensPerBlock: 8,
  /**
   * ropePoolFused calls of at most this many tokens (a serving loop's decode steps) are one launch: every block tests
   * the call's value rules and finds the later tokens naming its tokens' slots itself, where a larger call launches
   * check_values and claim_slots ahead of its kernel (H200, bf16 Hq=32 H=8 D=128: N=256 8.11 to 7.27 µs, N=16 the
   * same). Every block reads the rules' values and the slots, so the cost grows with the tokens: 0 turns it off.
   * The norm + RoPE of fusedNormRopeStacked keeps its check launch: tested in its blocks, ahead of their rows, the
   * rules measured slower (T=16 4.78 to 5.96 µs, T=256 8.81 to 10.31 µs), the check beside it hiding behind the row loads.
   */
  oneLaunchMostTokens: 256,
};
