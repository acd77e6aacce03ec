/** Element types a tensor may hold. f16, bf16 and fp8 are stored rounded to nearest even (fp8 saturating). */
export type DType = 'f32' | 'f16' | 'bf16' | 'i32' | 'i64' | Fp8DType;
/** The dtypes of a model's activations and weights. */
export type FloatDType = 'f32' | 'f16' | 'bf16';
/** The dtypes of positions and slots. */
export type IndexDType = 'i32' | 'i64';
/** 8-bit floats, for KV pools only: e4m3fn (no infinities, largest 448) and e5m2 (IEEE-like, largest 57344). */
export type Fp8DType = 'fp8e4m3' | 'fp8e5m2';
/** What a KV pool may hold: the model's dtype, or fp8 with scales. */
export type PoolDType = FloatDType | Fp8DType;
/** Which backend made a tensor or runs a call: `backend.kind`, `tensor.backend`. */
export type BackendKind = 'cpu' | 'webgpu' | 'cuda';
/** A tensor's dims, outermost first; literal (`readonly [2, 4]`) where the shape given was. */
export type Shape = readonly number[];

/** Every dtype, in the order messages list them. */
export const DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', 'i32', 'i64', 'fp8e4m3', 'fp8e5m2'];
/** The model dtypes: f32, f16, bf16. */
export const FLOAT_DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];
/** The index dtypes: i32, i64. */
export const INDEX_DTYPES: readonly IndexDType[] = ['i32', 'i64'];
/** The 8-bit float dtypes of KV pools: fp8e4m3, fp8e5m2. */
export const FP8_DTYPES: readonly Fp8DType[] = ['fp8e4m3', 'fp8e5m2'];

/** Whether a dtype is one of the fp8 pool dtypes. */
export function isFp8(dtype: DType): dtype is Fp8DType {
  return dtype === 'fp8e4m3' || dtype === 'fp8e5m2';
}

/** A tensor lives on one backend; its shape type is literal when the shape given to `tensor()` was. */
export interface Tensor<DT extends DType = DType, S extends Shape = Shape> {
  /** Its element type. */
  readonly dtype: DT;
  /** Its dims, outermost first. */
  readonly shape: S;
  /** The kind of backend that made it; a call on another backend's tensor is KV002. */
  readonly backend: BackendKind;
  /** Elements between neighbours along each dim, as PyTorch counts them: row-major for a tensor kvkit allocated, any for a view. */
  readonly strides: readonly number[];
  /** True once `dispose()` ran, or once a layer view's callback returned. */
  readonly disposed: boolean;
  /** Frees its storage once the work enqueued on it is done (a view frees nothing); using it afterwards is KV003. */
  dispose(): void;
}

/** The backend instance that made a tensor; validators compare it to the one running the call. */
export const TENSOR_OWNER: unique symbol = Symbol.for('kvkit.tensor.owner');

/** Set on the per-layer views handed to `writeLayerKv`: the layer they show. */
export const LAYER_VIEW: unique symbol = Symbol.for('kvkit.tensor.layerView');

/** Set on tensors that share storage with others (views, wrapped memory): where their elements lie in it. */
export const TENSOR_LAYOUT: unique symbol = Symbol.for('kvkit.tensor.layout');

/** Where a tensor's elements lie in the storage it may share with its views (offset and strides in elements). */
export interface StorageLayout {
  /** The same object for a tensor, its views and anything else over the same memory. */
  readonly root: object;
  readonly offset: number;
  readonly strides: readonly number[];
  /** Elements of this tensor's dtype the storage holds from its start. */
  readonly capacity: number;
}

/** What a backend's tensors carry beyond the public interface. */
export interface OwnedTensor<DT extends DType = DType, S extends Shape = Shape> extends Tensor<DT, S> {
  readonly [TENSOR_OWNER]: object;
  readonly [LAYER_VIEW]?: number;
  /** Absent: the tensor is its own storage, contiguous from element 0. */
  readonly [TENSOR_LAYOUT]?: StorageLayout;
}

/** Whether a value is a tensor some kvkit backend made (any backend's: the call's validator checks which). */
export function isTensor(value: unknown): value is OwnedTensor {
  return (
    typeof value === 'object' &&
    value !== null &&
    TENSOR_OWNER in value &&
    typeof (value as Partial<Tensor>).dtype === 'string' &&
    Array.isArray((value as Partial<Tensor>).shape)
  );
}

/** The number of elements of a shape: the product of its dims (1 for `[]`). */
export function numel(shape: Shape): number {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

/** Typed array that `read()` returns for each dtype. */
export type ReadResult<DT extends DType> = DT extends 'i32' ? Int32Array : DT extends 'i64' ? BigInt64Array : Float32Array;

/** The stored bits of a dtype, as `readBits()` returns them: fp8 as bytes, f16/bf16 as 16-bit patterns, f32 as 32-bit ones, integers as themselves. */
export type BitsOf<DT extends DType> = DT extends Fp8DType ? Uint8Array : DT extends 'f16' | 'bf16' ? Uint16Array : DT extends 'f32' ? Uint32Array : DT extends 'i32' ? Int32Array : BigInt64Array;

/** Bits accepted by `tensorFromBits()`: `BitsOf<DT>`, and for f32 a Float32Array too (its bits, NaN payloads included). */
export type BitsData<DT extends DType> = DT extends 'f32' ? Uint32Array | Float32Array : BitsOf<DT>;

/**
 * Data accepted by `tensor()`: floats for f32/f16/bf16/fp8 (rounded once), integers for i32/i64.
 * Always values, never bit patterns: a Uint16Array of bf16 bits from a checkpoint goes to `tensorFromBits()`.
 */
export type TensorData = readonly number[] | readonly bigint[] | Float32Array | Float64Array | Int32Array | BigInt64Array | Uint32Array | Int16Array | Uint16Array | Int8Array | Uint8Array;
