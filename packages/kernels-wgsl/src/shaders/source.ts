/** What a shader builder hands the runtime: the WGSL, its storage bindings in order (after the uniform block at 0), and its uniform fields. */
export interface BindingSpec {
  readonly name: string;
  readonly access: 'read' | 'read_write';
}

export interface KernelSource {
  readonly code: string;
  readonly bindings: readonly BindingSpec[];
  readonly params: readonly string[];
}

/** Declarations of the storage bindings, numbered from 1. */
export function declareBindings(bindings: readonly (BindingSpec & { type: string })[]): string {
  return bindings.map((b, i) => `@group(0) @binding(${i + 1}) var<storage, ${b.access}> ${b.name}: ${b.type};`).join('\n');
}
