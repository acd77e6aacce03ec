import type { FloatDType } from '../tensor.js';

/**
 * The kernel-interface language. A kernel's interface is data: its parameters
 * in order, each with a type and a one-line meaning, and (CUDA) its entry
 * points with their launch shapes or (WGSL) its uniform fields and storage
 * bindings. Each backend's generator writes the device declarations and the
 * typed host writers from it, so host and device agree by construction.
 */

/** What a CUDA device pointer points at: raw elements of a runtime dtype, f32s, or a device record. */
export type CudaElement = 'void' | 'float' | 'BadValueRecord' | 'SlotOwner';

/** A CUDA parameter: a device pointer (read-only or written), a 64-bit integer, or a double. Every one is 8 bytes. */
export type CudaParam =
  | { readonly kind: 'pointer'; readonly element: CudaElement; readonly writes: boolean; readonly doc: string }
  | { readonly kind: 'i64'; readonly doc: string }
  | { readonly kind: 'f64'; readonly doc: string };

export const input = (element: CudaElement, doc: string): CudaParam => ({ kind: 'pointer', element, writes: false, doc });
export const output = (element: CudaElement, doc: string): CudaParam => ({ kind: 'pointer', element, writes: true, doc });
export const i64 = (doc: string): CudaParam => ({ kind: 'i64', doc });
export const f64 = (doc: string): CudaParam => ({ kind: 'f64', doc });

/**
 * How an entry point is launched: threads per block (its `__launch_bounds__`),
 * the blocks per multiprocessor it is built for (register budget), and the
 * compile-time arguments the entry passes its template (ints or flags).
 */
export interface CudaLaunch {
  readonly threads: number;
  readonly minBlocksPerSM?: number;
  readonly constants?: Readonly<Record<string, number | boolean>>;
  readonly doc?: string;
}

/** One `extern "C" __global__` entry point: its name, its launch shape and, for typed kernels, the dtype it is built for. */
export interface CudaEntry {
  readonly name: string;
  readonly launch: string;
  readonly dtype?: FloatDType;
}

/** A CUDA kernel interface: one parameter struct (passed by value) shared by its entry points. */
export interface CudaKernelDecl {
  /** The host's name for it (`fusedNormRope`). */
  readonly kernel: string;
  /** The C++ struct (`FusedNormRopeParams`). */
  readonly struct: string;
  readonly doc: string;
  readonly params: Readonly<Record<string, CudaParam>>;
  readonly launches: Readonly<Record<string, CudaLaunch>>;
  readonly entries: readonly CudaEntry[];
}

/** A field of a device record (data the kernels keep in device memory and the host reads or sizes). */
export type RecordField = { readonly type: 'u64' | 'i64' | 'i32'; readonly doc: string };

export interface CudaRecordDecl {
  readonly struct: Exclude<CudaElement, 'void' | 'float'>;
  readonly doc: string;
  readonly fields: Readonly<Record<string, RecordField>>;
}

export function cudaKernel(decl: CudaKernelDecl): CudaKernelDecl {
  for (const e of decl.entries) {
    if (!(e.launch in decl.launches)) throw new Error(`${decl.kernel}: entry ${e.name} names launch '${e.launch}', which is not declared`);
  }
  return decl;
}

export function cudaRecord(decl: CudaRecordDecl): CudaRecordDecl {
  return decl;
}

/** One entry point per dtype × launch, named by `pattern` with `{dtype}` and `{launch}` filled in. */
export function entryGrid(pattern: string, dtypes: readonly FloatDType[], launches: readonly string[]): CudaEntry[] {
  return dtypes.flatMap((dtype) => launches.map((launch) => ({ name: pattern.replace('{dtype}', dtype).replace('{launch}', launch), launch, dtype })));
}

/** A WGSL uniform field: one 4-byte word of the kernel's `Params` block. */
export interface UniformField {
  readonly type: 'u32' | 'i32' | 'f32';
  readonly doc: string;
}

export const u32 = (doc: string): UniformField => ({ type: 'u32', doc });
export const i32 = (doc: string): UniformField => ({ type: 'i32', doc });
export const f32 = (doc: string): UniformField => ({ type: 'f32', doc });

/**
 * A WGSL storage binding, `array<element>`. `element` is a WGSL type or the
 * name of one of the kernel's type slots (the plan picks it: vector width,
 * atomics for half-word stores). A binding with `when` exists only in the
 * variants where that flag is set; the bindings that exist are numbered in
 * declaration order from 1 (0 is the uniform block).
 */
export interface StorageBindingDecl {
  readonly access: 'read' | 'read_write';
  readonly element: string;
  readonly doc: string;
  readonly when?: string;
}

export const read = (element: string, doc: string, when?: string): StorageBindingDecl => ({ access: 'read', element, doc, ...(when ? { when } : {}) });
export const readWrite = (element: string, doc: string, when?: string): StorageBindingDecl => ({ access: 'read_write', element, doc, ...(when ? { when } : {}) });

export interface WgslKernelDecl {
  /** The plan's `kernel` name (`normRope`). */
  readonly kernel: string;
  readonly doc: string;
  readonly uniforms: Readonly<Record<string, UniformField>>;
  /** Element types the plan chooses, by name, with what they may be. */
  readonly types?: Readonly<Record<string, string>>;
  /** Flags that switch bindings on, with what each means. */
  readonly variants?: Readonly<Record<string, string>>;
  readonly bindings: Readonly<Record<string, StorageBindingDecl>>;
}

/** Uniform words a kernel may have: one 256-byte block per dispatch. */
export const MAX_UNIFORM_WORDS = 64;

export function wgslKernel(decl: WgslKernelDecl): WgslKernelDecl {
  if (Object.keys(decl.uniforms).length > MAX_UNIFORM_WORDS) throw new Error(`${decl.kernel}: more uniform words than one ${MAX_UNIFORM_WORDS * 4}-byte block holds`);
  for (const [name, b] of Object.entries(decl.bindings)) {
    if (b.when && !(b.when in (decl.variants ?? {}))) throw new Error(`${decl.kernel}: binding ${name} depends on '${b.when}', which is not a declared variant flag`);
    // Type slots are capitalised (KvRow); WGSL's own element types are not (u32, vec4<u32>, atomic<u32>).
    if (/^[A-Z]/.test(b.element) && !(b.element in (decl.types ?? {}))) throw new Error(`${decl.kernel}: binding ${name} has element type ${b.element}, which is not a declared type slot`);
  }
  return decl;
}
