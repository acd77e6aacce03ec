import type { DType } from '@kvkit/contracts';
import { GATHER_MAX_RANK } from '@kvkit/contracts/kernels';
import { mergedDims, Workspace } from '@kvkit/contracts/backend';
import { LAUNCHES } from '../generated/kernels.js';
import type { GatherStridedParamsFields } from '../generated/kernels.js';
import type { CudaContext } from './context.js';
import { ELEMENT_BYTES } from './cudaTensor.js';
import type { CudaTensor } from './cudaTensor.js';
import type { DeviceBuffer } from './memory.js';
import type { ParamBlock } from './params.js';

/** What a gather reads: a view's element 0 (device address), dtype, shape and strides. */
export interface GatherSource {
  readonly ptr: number;
  readonly dtype: DType;
  readonly shape: readonly number[];
  readonly strides: readonly number[];
}

/**
 * The parameter blocks that copy `t`'s elements, row-major, to `dst`: one
 * launch, or, for a view of more dims than the kernel walks, one per index
 * of the outermost ones. None for an empty view.
 */
export function gatherLaunches(t: GatherSource, dst: number): GatherStridedParamsFields[] {
  const es = ELEMENT_BYTES[t.dtype];
  const dims = mergedDims(t.shape, t.strides);
  const count = dims.sizes.reduce((n, s) => n * s, 1);
  if (count === 0) return [];
  const outer = Math.max(0, dims.sizes.length - GATHER_MAX_RANK);
  const sizes = dims.sizes.slice(outer);
  const strides = dims.strides.slice(outer);
  const perLaunch = sizes.reduce((n, s) => n * s, 1);
  const launches: GatherStridedParamsFields[] = [];
  for (let j = 0; j < count / perLaunch; j++) {
    let rest = j;
    let from = 0;
    for (let d = outer - 1; d >= 0; d--) {
      from += (rest % dims.sizes[d]!) * dims.strides[d]!;
      rest = Math.floor(rest / dims.sizes[d]!);
    }
    const fields: Record<string, number> = { src: t.ptr + from * es, dst: dst + j * perLaunch * es, count: perLaunch, rank: sizes.length };
    // Dims past the rank: size 1, so the kernel's walk never moves along them.
    for (let d = 0; d < GATHER_MAX_RANK; d++) {
      fields[`size${d}`] = sizes[d] ?? 1;
      fields[`stride${d}`] = strides[d] ?? 0;
    }
    launches.push(fields as unknown as GatherStridedParamsFields);
  }
  return launches;
}

/** Where gathered copies start in the scratch buffer: aligned for the GEMM's operands (cuBLASLt assumes 256 bytes). */
export const GATHER_ALIGNMENT = 256;

/** An input that must also start on a multiple of `alignment` bytes, or (`copy`) be copied whatever its layout. */
export interface AlignedInput {
  readonly tensor: CudaTensor;
  readonly alignment: number;
  readonly copy?: boolean;
}

export function aligned(tensor: CudaTensor, alignment: number, copy = false): AlignedInput {
  return { tensor, alignment, copy };
}

/** More grid than this only adds scheduling: blocks per multiprocessor. */
const BLOCKS_PER_SM = 16;

const ENTRY = { 1: 'gather_strided_b8', 2: 'gather_strided_b16', 4: 'gather_strided_b32', 8: 'gather_strided_b64' } as const;

/**
 * Contiguous copies of strided views, for inputs a kernel does not read
 * through strides (or a GEMM operand off its alignment). An op's copies share
 * one scratch buffer kept between calls: everything runs on one stream, so a
 * call's gathers are enqueued after the kernels of the call before it have
 * read theirs. Enqueued after validation, before the op's own launches.
 */
export class StridedGather {
  readonly #cx: CudaContext;
  readonly #params: ParamBlock<'GatherStridedParams'>;
  readonly #scratch: Workspace<DeviceBuffer>;
  /** Gather launches enqueued so far, for tests that check a fast path gathers nothing. */
  #launches = 0;

  constructor(cx: CudaContext, params: ParamBlock<'GatherStridedParams'>) {
    this.#cx = cx;
    this.#params = params;
    this.#scratch = new Workspace<DeviceBuffer>({ allocate: (bytes, op) => cx.alloc(bytes, op), release: (b) => b.release() });
  }

  get launches(): number {
    return this.#launches;
  }

  /**
   * The address of each input's elements, contiguous (and aligned, for an
   * AlignedInput): its own where it already is, else a copy in the scratch
   * buffer. Called once per op call, with all its inputs: the scratch is
   * sized for them together, so no copy is freed before the call's kernels
   * have read it.
   */
  contiguous(inputs: readonly (CudaTensor | AlignedInput)[], op: string): number[] {
    const tensors = inputs.map((x) => ('tensor' in x ? x.tensor : x));
    const needs = inputs.map((x, i) => {
      const t = tensors[i]!;
      if (t.byteLength === 0) return false;
      return ('tensor' in x && x.copy) || !(t.contiguous && t.ptr % ('tensor' in x ? x.alignment : 1) === 0);
    });
    let bytes = 0;
    const at = tensors.map((t, i) => {
      if (!needs[i]) return -1;
      const start = bytes;
      bytes += Math.ceil(t.byteLength / GATHER_ALIGNMENT) * GATHER_ALIGNMENT;
      return start;
    });
    if (bytes === 0) return tensors.map((t) => t.ptr);
    const scratch = this.#scratch.take(bytes, op).ptr;
    return tensors.map((t, i) => {
      if (!needs[i]) return t.ptr;
      this.copy(t, scratch + at[i]!, op);
      return scratch + at[i]!;
    });
  }

  /** Enqueues the copy of `t`'s elements, row-major, to `dst` (contiguous, t.byteLength bytes). */
  copy(t: CudaTensor, dst: number, op: string): void {
    const entry = ENTRY[ELEMENT_BYTES[t.dtype] as keyof typeof ENTRY];
    const threads = LAUNCHES.gatherStrided.default.threads;
    for (const fields of gatherLaunches(t, dst)) {
      const grid = Math.max(1, Math.min(Math.ceil(fields.count / threads), this.#cx.multiprocessors * BLOCKS_PER_SM));
      this.#cx.launch(entry, this.#params.write(fields), grid, 1, threads, 0, op);
      this.#launches += 1;
    }
  }

  dispose(): void {
    this.#scratch.release();
  }
}
