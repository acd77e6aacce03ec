import { kernelOps, wireOps } from '../generated/backend.js';
import type { BackendOps, KvMaterializerKernels, OpKernels } from '../generated/backend.js';
import { validateCopySlots, validateDequantizeKv, validateFusedNormRopeStacked, validateMlaPoolFused, validatePagedAttention, validateRopePoolFused } from '../generated/validators.js';
import { ContractError } from '../errors/contractError.js';
import { bitsView } from '../backend/hostData.js';
import { numel } from '../tensor.js';
import type { BackendKind, BitsData, BitsOf, DType, OwnedTensor, ReadResult, Shape, Tensor, TensorData } from '../tensor.js';
import { backendDisposed, describeValue } from './call.js';
import type { ValidationContext } from './call.js';
import { validateTensorBits, validateTensorCreation, validateTensorRead } from './tensors.js';
import type { TensorLimit } from './tensors.js';
import type { ViewLayout } from '../backend/viewLayout.js';
import { validateSplitQkv, validateView } from './views.js';

/** Strides and offset of `backend.view`, in elements, relative to the base's element 0 (row-major strides when omitted). */
export interface ViewOptions {
  /** Elements between neighbours along each dim of the view; row-major for its shape when omitted. */
  readonly strides?: readonly number[];
  /** Where the view's element 0 lies, in elements from the base's element 0 (default 0). */
  readonly offset?: number;
}

/** Head counts and head dim of a fused qkv projection, for `splitQkv`. */
export interface QkvHeads<Hq extends number = number, H extends number = number, D extends number = number> {
  /** Query heads (Hq). */
  readonly numQoHeads: Hq;
  /** Key and value heads (H). */
  readonly numKvHeads: H;
  /** Elements per head (D). */
  readonly headDim: D;
}

/** `splitQkv`'s views: q `[N, Hq, D]`, k and v `[N, H, D]`. */
export interface QkvViews<DT extends DType = DType, N extends number = number, Hq extends number = number, H extends number = number, D extends number = number> {
  /** The query heads, `[N, Hq, D]`. */
  readonly q: Tensor<DT, readonly [N, Hq, D]>;
  /** The key heads, `[N, H, D]`. */
  readonly k: Tensor<DT, readonly [N, H, D]>;
  /** The value heads, `[N, H, D]`. */
  readonly v: Tensor<DT, readonly [N, H, D]>;
}

/** The validator each op that `prepare` takes runs, the one its call runs. */
const PREPARABLE = {
  fusedNormRopeStacked: validateFusedNormRopeStacked,
  ropePoolFused: validateRopePoolFused,
  dequantizeKv: validateDequantizeKv,
  pagedAttention: validatePagedAttention,
  copySlots: validateCopySlots,
  mlaPoolFused: validateMlaPoolFused,
} as const;

/** The ops `backend.prepare` builds ahead. */
export type PreparableOp = keyof typeof PREPARABLE;
/** What `prepare(op, args)` takes: the arguments of the call it prepares. */
export type PrepareArgs<Op extends PreparableOp> = Parameters<BackendOps[Op]>[0];
/** The validated arguments a backend's `prepare` receives for `op`. */
export type PreparedCall<Op extends PreparableOp = PreparableOp> = ReturnType<(typeof PREPARABLE)[Op]>;

/**
 * The public API every backend exposes: tensors and the ops, whose typed
 * signatures the generator writes into `BackendOps` from the contracts. Ops enqueue and
 * return at once; `sync()` waits and reports device-found errors.
 */
export interface Backend extends BackendOps {
  /** Which backend this is: 'cpu', 'webgpu' or 'cuda'. */
  readonly kind: BackendKind;
  /** The ops this backend runs. An op declared with an optional kernel that it lacks is missing here, and calling it throws once its arguments are validated. */
  readonly ops: readonly (keyof BackendOps)[];
  /** `cpu backend #1`, `webgpu backend #2 (SwiftShader)`, ...: how messages name this instance. */
  readonly label: string;
  /**
   * A tensor from values: floats are rounded once to the dtype, integers stored exactly. Typed arrays are read as
   * values too (a Uint16Array given as `bf16` holds numbers like 16256, not bit patterns): bits go to `tensorFromBits`.
   */
  tensor<const DT extends DType, const S extends Shape>(dtype: DT, shape: S, data?: TensorData): Tensor<DT, S>;
  /** A tensor of `dtype` and `shape` whose contents are not set: an output to write into, or a pool. */
  empty<const DT extends DType, const S extends Shape>(dtype: DT, shape: S): Tensor<DT, S>;
  /**
   * A tensor holding `bits` exactly as the dtype stores them, copied without conversion (NaN payloads, signed zeros
   * and subnormals kept): a Uint16Array for f16/bf16 (e.g. a checkpoint's bf16 weights), a Uint32Array or
   * Float32Array for f32, an Int32Array or BigInt64Array for i32/i64.
   */
  tensorFromBits<const DT extends DType, const S extends Shape>(dtype: DT, shape: S, bits: BitsData<DT>): Tensor<DT, S>;
  /**
   * A view of `base`'s storage (no copy): `shape`, with `strides` and `offset` in elements relative to `base`'s
   * element 0, as PyTorch counts them; views of views compose. Writes through either show in both. It never frees
   * the storage and is disposed with its base. Any op input may be a view; what an op writes must be contiguous.
   */
  view<DT extends DType, const S extends Shape>(base: Tensor<DT>, shape: S, options?: ViewOptions): Tensor<DT, S>;
  /** q, k and v as views of one fused projection `[N, (Hq + 2H)·D]` (or `[N, Hq + 2H, D]`): its query, key and value heads. */
  splitQkv<Q extends Tensor, const Hq extends number, const H extends number, const D extends number>(qkv: Q, heads: QkvHeads<Hq, H, D>): QkvViews<Q['dtype'], Q['shape'][0], Hq, H, D>;
  /** A fresh copy of the data; observes exactly the work enqueued before the call. */
  read<DT extends DType>(t: Tensor<DT>): Promise<ReadResult<DT>>;
  /** A fresh copy of the stored bits, unconverted (`BitsOf`: Uint16Array for f16/bf16, Uint32Array for f32); ordered as `read` is. */
  readBits<DT extends DType>(t: Tensor<DT>): Promise<BitsOf<DT>>;
  /** Waits for queued work; throws the first ContractError a kernel recorded since the last sync. */
  sync(): Promise<void>;
  /**
   * Hands the work enqueued so far to the device, without waiting: work the
   * application submits to the same queue or stream afterwards runs after it.
   */
  flush(): void;
  /**
   * Builds ahead what a call of `op` with these arguments will need, so that the call itself compiles nothing:
   * on WebGPU its pipelines (with `createComputePipelineAsync`) and the tables and scratch buffers it uses. Pass the
   * call's own arguments: they are validated as the call validates them (its ContractError, as a rejection) and
   * nothing is written to any of them. The CPU backend has nothing to build and resolves once they pass; so does
   * CUDA, whose kernels are all in the fatbin loaded when the backend was made. An op missing from `ops` rejects
   * with the error its call throws.
   */
  prepare<Op extends PreparableOp>(op: Op, args: PrepareArgs<Op>): Promise<void>;
  /** Frees everything this backend made (its tensors, materializers and device objects); any later call throws KV003. Buffers, devices and streams the application passed in stay the application's. */
  dispose(): void;
}

/**
 * What a backend implements: allocation, and a kernel per op over validated,
 * dim-bound arguments (`OpKernels`, generated). `defineBackend` puts the
 * generated validators in front, so no backend checks a shape by hand.
 */
export interface BackendKernels extends OpKernels {
  readonly kind: BackendKind;
  readonly label: string;
  /** Host-side values of a tensor (floats as numbers), where the backend keeps them there (value rules then run before any write). */
  hostValues?(t: OwnedTensor): ArrayLike<number | bigint> | undefined;
  /** The largest tensor of a dtype this backend holds, and why; `tensor()` and `empty()` refuse larger ones with KV045. */
  tensorLimit?(dtype: DType): TensorLimit;
  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor;
  /** A tensor whose storage is `bytes`, copied as they are (validated: `numel(shape)` elements of `dtype`). */
  tensorFromBytes(dtype: DType, shape: Shape, bytes: Uint8Array): OwnedTensor;
  /** A tensor over `base`'s storage at `layout` (absolute in that storage, validated to lie inside it); it shares, never frees. */
  view(base: OwnedTensor, shape: Shape, layout: ViewLayout): OwnedTensor;
  read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array>;
  /** A fresh buffer starting with the tensor's stored bytes (it may run on past them, to a whole word). */
  readBytes(t: OwnedTensor): Promise<ArrayBuffer>;
  sync(): Promise<void>;
  /** Submits whatever the backend holds back (a batch); a backend that submits as it goes does nothing. */
  flush(): void;
  /** Builds ahead what the validated call will need (`Backend.prepare`); a backend without it has nothing to build. */
  prepare?(op: PreparableOp, args: PreparedCall): Promise<void>;
  dispose(): void;
}

/** The materializer's kernels, under the name backends know them by. */
export type MaterializerKernels = KvMaterializerKernels;

/**
 * The public backend: each call validated against its contract, then handed to the kernels. Once `dispose()` ran,
 * every call (ops and materializer methods through their validators) throws KV003 and `sync()` rejects with it;
 * `dispose()` again does nothing. Kept here so no backend can answer a disposed call its own way.
 */
export function defineBackend(kernels: BackendKernels): Backend {
  let disposed = false;
  const ctx: ValidationContext = {
    owner: kernels,
    label: kernels.label,
    hostValues: kernels.hostValues?.bind(kernels),
    tensorLimit: kernels.tensorLimit?.bind(kernels),
    isDisposed: () => disposed,
  };
  function tensor<const DT extends DType, const S extends Shape>(dtype: DT, shape: S, data?: TensorData): Tensor<DT, S>;
  function tensor(dtype: unknown, shape: unknown, data?: unknown): Tensor {
    const v = validateTensorCreation(ctx, 'tensor', dtype, shape, data);
    return kernels.tensor(v.dtype, v.shape, data as TensorData | undefined);
  }
  function empty<const DT extends DType, const S extends Shape>(dtype: DT, shape: S): Tensor<DT, S>;
  function empty(dtype: unknown, shape: unknown): Tensor {
    const v = validateTensorCreation(ctx, 'empty', dtype, shape);
    return kernels.tensor(v.dtype, v.shape, undefined);
  }
  function read<DT extends DType>(t: Tensor<DT>): Promise<ReadResult<DT>>;
  function read(t: unknown): Promise<Float32Array | Int32Array | BigInt64Array> {
    try {
      return kernels.read(validateTensorRead(ctx, 'read', t));
    } catch (e) {
      return Promise.reject(e);
    }
  }
  function tensorFromBits<const DT extends DType, const S extends Shape>(dtype: DT, shape: S, bits: BitsData<DT>): Tensor<DT, S>;
  function tensorFromBits(dtype: unknown, shape: unknown, bits: unknown): Tensor {
    const v = validateTensorBits(ctx, dtype, shape, bits);
    return kernels.tensorFromBytes(v.dtype, v.shape, v.bytes);
  }
  function readBits<DT extends DType>(t: Tensor<DT>): Promise<BitsOf<DT>>;
  async function readBits(t: unknown): Promise<BitsOf<DType>> {
    const own = validateTensorRead(ctx, 'readBits', t);
    return bitsView(own.dtype, await kernels.readBytes(own), numel(own.shape));
  }
  function view<DT extends DType, const S extends Shape>(base: Tensor<DT>, shape: S, options?: ViewOptions): Tensor<DT, S>;
  function view(base: unknown, shape: unknown, options?: unknown, ...extra: unknown[]): Tensor {
    const v = validateView(ctx, base, shape, options, extra.length);
    return kernels.view(v.base, v.shape, v.layout);
  }
  function splitQkv<Q extends Tensor, const Hq extends number, const H extends number, const D extends number>(qkv: Q, heads: QkvHeads<Hq, H, D>): QkvViews<Q['dtype'], Q['shape'][0], Hq, H, D>;
  function splitQkv(qkv: unknown, heads: unknown, ...extra: unknown[]): { q: Tensor; k: Tensor; v: Tensor } {
    const s = validateSplitQkv(ctx, qkv, heads, extra.length);
    const { N, Hq, H, D } = s.dims;
    return { q: kernels.view(s.qkv, [N, Hq, D], s.q), k: kernels.view(s.qkv, [N, H, D], s.k), v: kernels.view(s.qkv, [N, H, D], s.v) };
  }
  const ops = kernelOps(kernels);
  return {
    kind: kernels.kind,
    label: kernels.label,
    ops,
    tensor,
    empty,
    tensorFromBits,
    view,
    splitQkv,
    read,
    readBits,
    ...wireOps(kernels, ctx),
    sync: () => (disposed ? Promise.reject(backendDisposed('sync')) : kernels.sync()),
    flush: () => {
      if (disposed) throw backendDisposed('flush');
      kernels.flush();
    },
    prepare: async (op: PreparableOp, args: unknown, ...extra: unknown[]) => {
      if (!Object.hasOwn(PREPARABLE, op)) {
        const known = Object.keys(PREPARABLE).map((name) => `'${name}'`).join(', ');
        throw new ContractError('KV044', 'prepare', { arg: 'op', expected: `one of ${known}`, actual: describeValue(op) });
      }
      const checked = PREPARABLE[op](args, ctx, extra.length);
      // An optional kernel the backend lacks: the rejection is the error its call throws.
      if (!(ops as readonly string[]).includes(op)) throw new Error(`${op} is not available on ${kernels.label} yet: backend.ops lists the ops it runs`);
      await kernels.prepare?.(op, checked);
    },
    dispose: () => {
      if (disposed) return;
      disposed = true;
      kernels.dispose();
    },
  };
}
