import type { CreateKvMaterializerFn, FusedNormRopeStackedFn, KvMaterializer, RopePoolFusedFn } from '../generated/signatures.js';
import {
  validateCreateKvMaterializer,
  validateFusedNormRopeStacked,
  validateKvMaterializerMaterialize,
  validateKvMaterializerMaterializeInto,
  validateRopePoolFused,
} from '../generated/validators.js';
import type {
  CreateKvMaterializerChecked,
  FusedNormRopeStackedChecked,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  RopePoolFusedChecked,
} from '../generated/validators.js';
import type { BackendKind, DType, OwnedTensor, ReadResult, Shape, Tensor, TensorData } from '../tensor.js';
import type { ValidationContext } from './call.js';
import { validateTensorCreation, validateTensorUse } from './tensors.js';
import type { TensorLimit } from './tensors.js';

/** The public API every backend exposes (API.md). Ops enqueue and return at once; `sync()` waits and reports device-found errors. */
export interface Backend {
  readonly kind: BackendKind;
  /** `cpu backend #1`, `webgpu backend #2 (SwiftShader)`, ...: how messages name this instance. */
  readonly label: string;
  tensor<const DT extends DType, const S extends Shape>(dtype: DT, shape: S, data?: TensorData): Tensor<DT, S>;
  empty<const DT extends DType, const S extends Shape>(dtype: DT, shape: S): Tensor<DT, S>;
  /** A fresh copy of the data; observes exactly the work enqueued before the call. */
  read<DT extends DType>(t: Tensor<DT>): Promise<ReadResult<DT>>;
  readonly fusedNormRopeStacked: FusedNormRopeStackedFn;
  readonly createKvMaterializer: CreateKvMaterializerFn;
  readonly ropePoolFused: RopePoolFusedFn;
  /** Waits for queued work; throws the first ContractError a kernel recorded since the last sync. */
  sync(): Promise<void>;
  dispose(): void;
}

/**
 * What a backend implements: allocation and kernels over validated,
 * dim-bound arguments. `defineBackend` puts the generated validators in
 * front, so no backend checks a shape by hand.
 */
export interface BackendKernels {
  readonly kind: BackendKind;
  readonly label: string;
  /** Host-side values of an index tensor, where the backend keeps them there (value rules then run before any write). */
  hostValues?(t: OwnedTensor): ArrayLike<number | bigint> | undefined;
  /** The largest tensor of a dtype this backend holds, and why; `tensor()` and `empty()` refuse larger ones with KV045. */
  tensorLimit?(dtype: DType): TensorLimit;
  tensor(dtype: DType, shape: Shape, data: TensorData | undefined): OwnedTensor;
  read(t: OwnedTensor): Promise<Float32Array | Int32Array | BigInt64Array>;
  fusedNormRopeStacked(args: FusedNormRopeStackedChecked): { kOut: OwnedTensor; vOut: OwnedTensor };
  createKvMaterializer(args: CreateKvMaterializerChecked): MaterializerKernels;
  ropePoolFused(args: RopePoolFusedChecked): { qRot: OwnedTensor; kRot: OwnedTensor };
  sync(): Promise<void>;
  dispose(): void;
}

export interface MaterializerKernels {
  materialize(args: KvMaterializerMaterializeChecked): void;
  materializeInto(args: KvMaterializerMaterializeIntoChecked): void;
  dispose(): void;
}

/** The public backend: each call validated against its contract, then handed to the kernels. */
export function defineBackend(kernels: BackendKernels): Backend {
  const owner: object = kernels;
  const ctx: ValidationContext = { owner, label: kernels.label, hostValues: kernels.hostValues?.bind(kernels), tensorLimit: kernels.tensorLimit?.bind(kernels) };
  const created = (dtype: unknown, shape: unknown, data: unknown, op: 'tensor' | 'empty') => {
    const v = validateTensorCreation(ctx, op, dtype, shape, data);
    return kernels.tensor(v.dtype, v.shape, data as TensorData | undefined);
  };
  return {
    kind: kernels.kind,
    label: kernels.label,
    tensor: ((dtype: unknown, shape: unknown, data?: unknown) => created(dtype, shape, data, 'tensor')) as Backend['tensor'],
    empty: ((dtype: unknown, shape: unknown) => created(dtype, shape, undefined, 'empty')) as Backend['empty'],
    read: ((t: unknown) => {
      try {
        return kernels.read(validateTensorUse(ctx, 'read', t));
      } catch (e) {
        return Promise.reject(e);
      }
    }) as Backend['read'],
    fusedNormRopeStacked: ((args: unknown) => kernels.fusedNormRopeStacked(validateFusedNormRopeStacked(args, ctx))) as unknown as FusedNormRopeStackedFn,
    ropePoolFused: ((args: unknown) => kernels.ropePoolFused(validateRopePoolFused(args, ctx))) as unknown as RopePoolFusedFn,
    createKvMaterializer: ((args: unknown) => {
      const made = validateCreateKvMaterializer(args, ctx);
      const impl = kernels.createKvMaterializer(made);
      const inherited = { dims: made.dims, dtypes: made.dtypes };
      const materializer: KvMaterializer<DType, number, number, number, number, number> = {
        materialize: ((ctxHidden: unknown, positions: unknown, writeLayerKv: unknown) =>
          impl.materialize(validateKvMaterializerMaterialize({ ctxHidden, positions, writeLayerKv }, ctx, inherited))) as never,
        materializeInto: ((a: unknown) => impl.materializeInto(validateKvMaterializerMaterializeInto(a, ctx, inherited))) as never,
        dispose: () => impl.dispose(),
      };
      return materializer;
    }) as CreateKvMaterializerFn,
    sync: () => kernels.sync(),
    dispose: () => kernels.dispose(),
  };
}
