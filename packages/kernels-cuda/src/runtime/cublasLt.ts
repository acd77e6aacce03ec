import type { FloatDType } from '@kvkit/contracts';
import koffi from 'koffi';
import type { LibraryHandle } from 'koffi';
import type { Fn } from './driver.js';
import { cudaCallFailed } from './errors.js';

/** Where cuBLASLt is looked for (the CUDA toolkit and PyTorch's wheels ship one; LD_LIBRARY_PATH finds them). */
export const CUBLASLT_LIBRARIES = ['libcublasLt.so.13', 'libcublasLt.so.12', 'libcublasLt.so'] as const;

const CUBLAS_COMPUTE_32F = 68;
const CUDA_DATA_TYPE: Readonly<Record<FloatDType, number>> = { f32: 0, f16: 2, bf16: 14 };
const CUBLASLT_MATMUL_DESC_TRANSA = 3;
const CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET = 15;
const CUBLAS_OP_T = 1;
const CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
const CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
const CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
/** cublasLtMatmulHeuristicResult_t: algo (64 bytes), workspaceSize, state, wavesCount, reserved[4]. */
const HEURISTIC_RESULT_BYTES = 96;
/** What cuBLASLt's Hopper kernels ask for at most. */
export const CUBLASLT_WORKSPACE_BYTES = 32 * 1024 * 1024;

interface Bindings {
  readonly lib: LibraryHandle;
  readonly name: string;
  readonly create: Fn;
  readonly destroy: Fn;
  readonly statusName: Fn;
  readonly descCreate: Fn;
  readonly descDestroy: Fn;
  readonly descSet: Fn;
  readonly layoutCreate: Fn;
  readonly layoutDestroy: Fn;
  readonly layoutSet: Fn;
  readonly prefCreate: Fn;
  readonly prefDestroy: Fn;
  readonly prefSet: Fn;
  readonly heuristic: Fn;
  readonly matmul: Fn;
}

let bindings: Bindings | { reason: string } | undefined;

function bind(): Bindings | { reason: string } {
  if (bindings) return bindings;
  const tried: string[] = [];
  for (const name of CUBLASLT_LIBRARIES) {
    let lib: LibraryHandle;
    try {
      lib = koffi.load(name);
    } catch {
      tried.push(name);
      continue;
    }
    try {
      const f = (decl: string) => lib.func(decl);
      bindings = {
        lib,
        name,
        create: f('int cublasLtCreate(_Out_ void **handle)'),
        destroy: f('int cublasLtDestroy(void *handle)'),
        statusName: f('const char *cublasLtGetStatusName(int status)'),
        descCreate: f('int cublasLtMatmulDescCreate(_Out_ void **desc, int computeType, int scaleType)'),
        descDestroy: f('int cublasLtMatmulDescDestroy(void *desc)'),
        descSet: f('int cublasLtMatmulDescSetAttribute(void *desc, int attr, void *value, size_t bytes)'),
        layoutCreate: f('int cublasLtMatrixLayoutCreate(_Out_ void **layout, int type, uint64_t rows, uint64_t cols, int64_t ld)'),
        layoutDestroy: f('int cublasLtMatrixLayoutDestroy(void *layout)'),
        layoutSet: f('int cublasLtMatrixLayoutSetAttribute(void *layout, int attr, void *value, size_t bytes)'),
        prefCreate: f('int cublasLtMatmulPreferenceCreate(_Out_ void **pref)'),
        prefDestroy: f('int cublasLtMatmulPreferenceDestroy(void *pref)'),
        prefSet: f('int cublasLtMatmulPreferenceSetAttribute(void *pref, int attr, void *value, size_t bytes)'),
        heuristic: f('int cublasLtMatmulAlgoGetHeuristic(void *handle, void *desc, void *a, void *b, void *c, void *d, void *pref, int requested, void *results, _Out_ int *count)'),
        matmul: f(
          'int cublasLtMatmul(void *handle, void *desc, void *alpha, uint64_t a, void *aLayout, uint64_t b, void *bLayout, void *beta, uint64_t c, void *cLayout, uint64_t d, void *dLayout, void *algo, uint64_t workspace, size_t workspaceBytes, void *stream)',
        ),
      };
      return bindings;
    } catch (e) {
      tried.push(`${name} (${(e as Error).message})`);
    }
  }
  bindings = { reason: `cuBLASLt not found (tried ${tried.join(', ')})` };
  return bindings;
}

/** One shape's descriptors and the algorithm cuBLASLt's heuristic chose. */
export interface GemmPlan {
  /** The multiprocessors its algorithm was chosen for (0: the whole device), which picks its operation descriptor. */
  readonly multiprocessors: number;
  readonly layouts: readonly bigint[];
  readonly result: Buffer;
}

/**
 * cuBLASLt for C[M, N] = A[M, K] · W[N, K]^T, all row-major. Column-major,
 * as cuBLASLt sees them: W is K × N (used transposed), A is K × M, and
 * C = Wᵀ·A is N × M with leading dimension N, which is row-major [M, N].
 * f32 accumulation and scale (and so no TF32 for f32 data).
 */
export class CublasLt {
  readonly library: string;
  readonly #b: Bindings;
  readonly #handle: bigint;
  /** By dtype, and the multiprocessors targeted where not the whole device (`bf16/120`). */
  readonly #descs = new Map<string, bigint>();
  readonly #pref: bigint;
  readonly #one = new Float32Array([1]);
  readonly #zero = new Float32Array([0]);

  /** cuBLASLt on the current context, or why not (absent, or its handle could not be made). */
  static open(): CublasLt | { reason: string } {
    const b = bind();
    if ('reason' in b) return b;
    const handle: (bigint | null)[] = [null];
    const status = b.create(handle);
    if (status !== 0) return { reason: `cublasLtCreate failed with ${b.statusName(status)}` };
    return new CublasLt(b, handle[0]!);
  }

  private constructor(b: Bindings, handle: bigint) {
    this.#b = b;
    this.library = b.name;
    this.#handle = handle;
    const pref: (bigint | null)[] = [null];
    this.#check('createCudaBackend', 'cublasLtMatmulPreferenceCreate', b.prefCreate(pref));
    this.#pref = pref[0]!;
    const bytes = new BigUint64Array([BigInt(CUBLASLT_WORKSPACE_BYTES)]);
    this.#check('createCudaBackend', 'cublasLtMatmulPreferenceSetAttribute', b.prefSet(this.#pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, bytes, 8));
  }

  #check(op: string, call: string, status: number): void {
    if (status !== 0) throw cudaCallFailed(op, call, String(this.#b.statusName(status)), 'cuBLASLt reported an error');
  }

  #desc(dtype: FloatDType, op: string, multiprocessors = 0): bigint {
    const key = multiprocessors > 0 ? `${dtype}/${multiprocessors}` : dtype;
    const known = this.#descs.get(key);
    if (known !== undefined) return known;
    const desc: (bigint | null)[] = [null];
    this.#check(op, 'cublasLtMatmulDescCreate', this.#b.descCreate(desc, CUBLAS_COMPUTE_32F, CUDA_DATA_TYPE.f32));
    this.#check(op, 'cublasLtMatmulDescSetAttribute', this.#b.descSet(desc[0], CUBLASLT_MATMUL_DESC_TRANSA, new Int32Array([CUBLAS_OP_T]), 4));
    // Kernels sized for fewer multiprocessors than the device has, where other work runs beside them.
    if (multiprocessors > 0) this.#check(op, 'cublasLtMatmulDescSetAttribute', this.#b.descSet(desc[0], CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, new Int32Array([multiprocessors]), 4));
    this.#descs.set(key, desc[0]!);
    return desc[0]!;
  }

  /**
   * The plan for one shape; undefined when cuBLASLt offers no algorithm for it
   * (the caller falls back). With `batch`, C_b = A · W_b^T for b < batch.count:
   * W_b and C_b are batch.strideW and batch.strideC elements apart, A is shared.
   * `multiprocessors`: the algorithm chosen for that many (cuBLASLt's SM count target), 0 for the whole device.
   */
  plan(dtype: FloatDType, M: number, N: number, K: number, op: string, batch?: { count: number; strideW: number; strideC: number }, multiprocessors = 0): GemmPlan | undefined {
    const type = CUDA_DATA_TYPE[dtype];
    const count = new Int32Array([batch?.count ?? 1]);
    const layout = (rows: number, cols: number, ld: number, stride: number) => {
      const l: (bigint | null)[] = [null];
      this.#check(op, 'cublasLtMatrixLayoutCreate', this.#b.layoutCreate(l, type, rows, cols, ld));
      if (batch) {
        this.#check(op, 'cublasLtMatrixLayoutSetAttribute', this.#b.layoutSet(l[0], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, count, 4));
        this.#check(op, 'cublasLtMatrixLayoutSetAttribute', this.#b.layoutSet(l[0], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, new BigInt64Array([BigInt(stride)]), 8));
      }
      return l[0]!;
    };
    const layouts = [layout(K, N, K, batch?.strideW ?? 0), layout(K, M, K, 0), layout(N, M, N, batch?.strideC ?? 0)];
    const result = Buffer.alloc(HEURISTIC_RESULT_BYTES * 2);
    const found = [0];
    const desc = this.#desc(dtype, op, multiprocessors);
    this.#check(op, 'cublasLtMatmulAlgoGetHeuristic', this.#b.heuristic(this.#handle, desc, layouts[0], layouts[1], layouts[2], layouts[2], this.#pref, 1, result, found));
    const plan = { multiprocessors, layouts, result };
    if (found[0] === 0 || result.readInt32LE(72) !== 0) {
      this.forget(plan);
      return undefined;
    }
    return plan;
  }

  /** Drops a plan's descriptors. */
  forget(plan: GemmPlan): void {
    for (const l of plan.layouts) this.#b.layoutDestroy(l);
  }

  matmul(plan: GemmPlan, dtype: FloatDType, a: number, w: number, c: number, workspace: number, stream: bigint, op: string): void {
    const [wLayout, aLayout, cLayout] = plan.layouts;
    const status = this.#b.matmul(this.#handle, this.#desc(dtype, op, plan.multiprocessors), this.#one, w, wLayout, a, aLayout, this.#zero, c, cLayout, c, cLayout, plan.result, workspace, CUBLASLT_WORKSPACE_BYTES, stream);
    if (status !== 0) this.#check(op, 'cublasLtMatmul', status);
  }

  destroy(): void {
    for (const desc of this.#descs.values()) this.#b.descDestroy(desc);
    this.#descs.clear();
    this.#b.prefDestroy(this.#pref);
    this.#b.destroy(this.#handle);
  }
}
