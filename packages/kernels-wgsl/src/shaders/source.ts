/** A storage binding as the runtime lays it out: its name (the key of its range) and access. */
export interface BindingSpec {
  readonly name: string;
  readonly access: 'read' | 'read_write';
}

/** A kernel's storage bindings for one variant: in binding order, and their WGSL declarations. */
export interface KernelBindings {
  readonly specs: readonly BindingSpec[];
  readonly wgsl: string;
}

/**
 * A kernel's interface as generated from its declaration (src/generated/params.ts):
 * the uniform block, the bindings of a variant, and the writer of its uniform words.
 * `R` (the ranges a dispatch binds) only types the dispatch.
 */
export interface KernelInterface<P, R, O = void> {
  readonly kernel: string;
  readonly uniformFields: readonly (keyof P & string)[];
  /** `struct Params { ... }` and its binding at 0. */
  readonly uniformsWgsl: string;
  bindings(options: O): KernelBindings;
  /** Writes `p` into words `at`, `at + 1`, ... in declared order. */
  writeUniforms(words: Uint32Array, at: number, p: P): void;
  /** Never set: carries `R` for the dispatch's type. */
  readonly ranges?: R;
}

/** What a shader builder hands the runtime: the WGSL, its storage bindings in order (after the uniform block at 0), and its uniform writer. */
export interface KernelSource<P = any, R = any> {
  readonly code: string;
  readonly bindings: readonly BindingSpec[];
  readonly writeUniforms: (words: Uint32Array, at: number, p: P) => void;
  readonly ranges?: R;
}

/** The source of a kernel built with `iface`'s uniform block and `bindings`. */
export function kernelSource<P, R, O>(iface: KernelInterface<P, R, O>, bindings: KernelBindings, code: string): KernelSource<P, R> {
  return { code, bindings: bindings.specs, writeUniforms: iface.writeUniforms };
}
