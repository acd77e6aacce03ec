import type { FloatDType } from '@kvkit/contracts';
import { LAUNCHES } from '../generated/kernels.js';
import type { GemmPlan } from '../runtime/cublasLt.js';
import type { CudaKernels } from '../runtime/cudaKernels.js';
import { ELEMENT_BYTES } from '../runtime/cudaTensor.js';

/** Blocks a grid may have in y (and z). */
const MAX_GRID_Y = 65535;

/** Plans kept per projection (one per distinct token count); the oldest is dropped first. */
const MAX_PLANS = 64;

/** Which GEMM ran: cuBLASLt where it loads, else the package's own kernels. */
export type GemmEngine = 'cublasLt' | 'kvkit';

/**
 * The materializer's projection A[M, K] · W[N, K]^T for one weight shape,
 * with W's N rows taken as `blocks` blocks of N/blocks rows and each block's
 * [M, N/blocks] product written after the other (blocks = 1: the plain
 * row-major C[M, N]). With W = kvWeight [L, 2, H*D, hidden] and 2L blocks,
 * that is [L, 2, T, H*D]: each layer's K and V as [T, H, D] tensors, straight
 * from the GEMM. cuBLASLt (strided-batched, plans cached per M) when the
 * backend has it, otherwise the tensor-core kernel (f16, bf16) or the f32 FMA
 * kernel, a grid layer per block. Rounded once to `dtype`.
 */
export class Projection {
  readonly #kernels: CudaKernels;
  readonly #plans = new Map<number, GemmPlan | null>();
  /** Rows of W per block. */
  readonly #n: number;

  constructor(
    kernels: CudaKernels,
    readonly dtype: FloatDType,
    readonly N: number,
    readonly K: number,
    readonly blocks = 1,
    /** 'kvkit' keeps cuBLASLt out even where it loads (the bench compares the two engines). */
    readonly engine?: GemmEngine,
    /** cuBLASLt's algorithms chosen for this many multiprocessors, where other work runs beside (undefined: the whole device). */
    readonly multiprocessors?: number,
  ) {
    this.#kernels = kernels;
    this.#n = N / blocks;
  }

  /** The engine a call with M rows takes. */
  engineFor(M: number, op: string): GemmEngine {
    return this.#plan(M, op) ? 'cublasLt' : 'kvkit';
  }

  run(a: number, w: number, c: number, M: number, op: string): void {
    if (M === 0) return;
    const cx = this.#kernels.cx;
    const plan = this.#plan(M, op);
    const lt = this.#kernels.cublasLt;
    if (plan && lt) {
      lt.matmul(plan, this.dtype, a, w, c, this.#kernels.cublasWorkspace(op), cx.stream, op);
      return;
    }
    const n = this.#n;
    const p = this.#kernels.params.gemm;
    const shape = this.dtype === 'f32' ? LAUNCHES.gemm.simt : LAUNCHES.gemm.tensorcore;
    const kernel = this.dtype === 'f32' ? 'gemm_simt_f32' : this.dtype === 'f16' ? 'gemm_tensorcore_f16' : 'gemm_tensorcore_bf16';
    const es = ELEMENT_BYTES[this.dtype];
    // Rows of A and C go in launches of at most MAX_GRID_Y tiles down (the grid's y limit); each block's C stays M rows long.
    const rowsPerLaunch = MAX_GRID_Y * shape.blockM;
    for (let m0 = 0; m0 < M; m0 += rowsPerLaunch) {
      const m = Math.min(rowsPerLaunch, M - m0);
      p.write({ a: a + m0 * this.K * es, b: w, c: c + m0 * n * es, m, n, k: this.K, batchStrideB: n * this.K, batchStrideC: M * n });
      cx.launch(kernel, p, Math.ceil(n / shape.blockN), Math.ceil(m / shape.blockM), shape.threads, 0, op, this.blocks);
    }
  }

  #plan(M: number, op: string): GemmPlan | undefined {
    const lt = this.#kernels.cublasLt;
    if (!lt || this.engine === 'kvkit') return undefined;
    const known = this.#plans.get(M);
    if (known !== undefined) return known ?? undefined;
    if (this.#plans.size >= MAX_PLANS) {
      const [oldestM, oldest] = this.#plans.entries().next().value!;
      if (oldest) lt.forget(oldest);
      this.#plans.delete(oldestM);
    }
    const n = this.#n;
    const batch = this.blocks > 1 ? { count: this.blocks, strideW: n * this.K, strideC: M * n } : undefined;
    const plan = lt.plan(this.dtype, M, n, this.K, op, batch, this.multiprocessors);
    this.#plans.set(M, plan ?? null);
    return plan;
  }

  dispose(): void {
    const lt = this.#kernels.cublasLt;
    if (lt && !this.#kernels.disposed) for (const plan of this.#plans.values()) if (plan) lt.forget(plan);
    this.#plans.clear();
  }
}
