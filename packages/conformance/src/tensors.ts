import type { Backend, DType, IndexDType, PoolDType, Tensor } from '@kvkit/contracts';

/**
 * Tensor bookkeeping for one test on one backend: what it made is disposed
 * at the end (GPU backends hold device memory), index tensors are built in
 * the dtype asked for, and reads come back as plain arrays.
 */
export class Scope {
  private readonly made = new Set<Tensor>();
  private readonly others: { dispose(): void }[] = [];

  constructor(readonly backend: Backend) {}

  track<T extends Tensor>(t: T): T {
    this.made.add(t);
    return t;
  }

  /** Anything else to dispose with the scope (a materializer), disposed first. */
  owned<T extends { dispose(): void }>(x: T): T {
    this.others.push(x);
    return x;
  }

  float<DT extends PoolDType>(dtype: DT, shape: readonly number[], data: ArrayLike<number>): Tensor<DT> {
    return this.track(this.backend.tensor(dtype, shape, Float32Array.from(data)));
  }

  /** i64 data goes in as a BigInt64Array, i32 as an Int32Array: both typed-array paths are exercised. */
  index<DT extends IndexDType>(dtype: DT, shape: readonly number[], values: readonly number[]): Tensor<DT> {
    const data = dtype === 'i64' ? BigInt64Array.from(values, (v) => BigInt(v)) : Int32Array.from(values);
    return this.track(this.backend.tensor(dtype, shape, data));
  }

  empty<DT extends DType>(dtype: DT, shape: readonly number[]): Tensor<DT> {
    return this.track(this.backend.empty(dtype, shape));
  }

  dispose(): void {
    for (const x of this.others.splice(0)) x.dispose();
    for (const t of this.made) if (!t.disposed) t.dispose();
    this.made.clear();
  }
}

/** A float tensor's values as a Float32Array (f16 and bf16 widened exactly). */
export async function readFloats(backend: Backend, t: Tensor): Promise<Float32Array> {
  const data = await backend.read(t);
  if (!(data instanceof Float32Array)) throw new Error(`read(${t.dtype} tensor) returned ${data.constructor.name}; expected Float32Array`);
  return data;
}

/** An index tensor's values as numbers (Int32Array for i32, BigInt64Array for i64 per API.md). */
export async function readIndices(backend: Backend, t: Tensor): Promise<number[]> {
  const data = await backend.read(t);
  if (t.dtype === 'i32' && !(data instanceof Int32Array)) throw new Error(`read(i32 tensor) returned ${data.constructor.name}; expected Int32Array`);
  if (t.dtype === 'i64' && !(data instanceof BigInt64Array)) throw new Error(`read(i64 tensor) returned ${data.constructor.name}; expected BigInt64Array`);
  return Array.from(data as ArrayLike<number | bigint>, (v) => Number(v));
}

/** What is wrong with a tensor's dtype, shape or backend (empty when nothing is). */
export function tensorProblems(t: Tensor, dtype: DType, shape: readonly number[], backend: Backend): string[] {
  const problems: string[] = [];
  if (t.dtype !== dtype) problems.push(`dtype ${t.dtype}, expected ${dtype}`);
  if (t.shape.length !== shape.length || t.shape.some((d, i) => d !== shape[i])) problems.push(`shape [${t.shape.join(', ')}], expected [${shape.join(', ')}]`);
  if (t.backend !== backend.kind) problems.push(`backend ${t.backend}, expected ${backend.kind}`);
  return problems;
}

/** Checks an op's output tensor: dtype, shape, backend, and still alive. */
export function expectTensor(what: string, t: Tensor, dtype: DType, shape: readonly number[], backend: Backend): void {
  const problems = tensorProblems(t, dtype, shape, backend);
  if (t.disposed) problems.push('already disposed');
  if (problems.length > 0) throw new Error(`${what}: ${problems.join('; ')}`);
}

/** The ops called with plain objects: for cases built from runtime dims, and for deliberately wrong calls. */
export interface UntypedOps {
  fusedNormRopeStacked(args: unknown): { kOut: Tensor; vOut: Tensor };
  ropePoolFused(args: unknown): { qRot: Tensor; kRot: Tensor };
  createKvMaterializer(args: unknown): UntypedMaterializer;
  dequantizeKv(args: unknown): void;
  pagedAttention(args: unknown): { out: Tensor; lse: Tensor };
  copySlots(args: unknown): void;
}

export interface UntypedMaterializer {
  materialize(args: unknown): void;
  materializeInto(args: unknown): void;
  dispose(): void;
}

export function untyped(backend: Backend): UntypedOps {
  return backend as unknown as UntypedOps;
}

/** Rows `[rowSize]` of a flat array, picked by row index. */
export function gatherRows(values: ArrayLike<number>, rows: readonly number[], rowSize: number): Float32Array {
  const out = new Float32Array(rows.length * rowSize);
  rows.forEach((row, i) => {
    for (let j = 0; j < rowSize; j++) out[i * rowSize + j] = values[row * rowSize + j]!;
  });
  return out;
}
