import type { CudaKernelDecl, CudaParam, WgslKernelDecl } from '@kvkit/contracts/kernels';

/** One launch shape of a CUDA kernel, with the entry points built for it. */
export interface LaunchRow {
  name: string;
  threads: number;
  /** Blocks per multiprocessor it is built for (its register budget); absent where none is declared. */
  minBlocksPerSM: number | undefined;
  constants: string;
  doc: string;
  entries: string[];
}

/** The launches of a CUDA kernel in declared order, each with its entry points (every dtype's). */
export function launchRows(k: CudaKernelDecl): LaunchRow[] {
  return Object.entries(k.launches).map(([name, l]) => ({
    name,
    threads: l.threads,
    minBlocksPerSM: l.minBlocksPerSM,
    constants: Object.entries(l.constants ?? {})
      .map(([c, v]) => `${c} = ${v}`)
      .join(', '),
    doc: l.doc ?? '',
    entries: k.entries.filter((e) => e.launch === name).map((e) => e.name),
  }));
}

/** How a parameter reads in the struct: a pointer's element and direction, or its scalar type. */
export function cudaParamType(p: CudaParam): string {
  if (p.kind !== 'pointer') return p.kind === 'i64' ? 'int64' : 'double';
  return `${p.writes ? '' : 'const '}${p.element}*${p.writes ? ' (written)' : ''}`;
}

/** A WGSL storage binding: its access, element type (or type slot), meaning, and the variant flag it needs, if any. */
export interface BindingRow {
  name: string;
  access: string;
  element: string;
  doc: string;
  when: string | undefined;
}

export function bindingRows(k: WgslKernelDecl): BindingRow[] {
  return Object.entries(k.bindings).map(([name, b]) => ({ name, access: b.access, element: b.element, doc: b.doc, when: b.when }));
}
