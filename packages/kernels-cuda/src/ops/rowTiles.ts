import type { FloatDType } from '@kvkit/contracts';
import type { RowPath } from '../runtime/kernelNames.js';

/** The two row kernels: fused norm + RoPE (K and V per row) and RoPE + pool scatter (one tensor per row). */
export type RowKernel = 'normRope' | 'ropePool';

/**
 * What the vector kernels were built for (the `__launch_bounds__` and ROWS
 * arguments in src/cuda/fused_norm_rope.cu and rope_pool.cu; a test reads them
 * back): blocks of 256 threads resident per multiprocessor, and rows a lane
 * group takes per step.
 */
export const ROW_KERNEL_SHAPES: Readonly<Record<RowKernel, Readonly<Record<'nv1' | 'nv2', { readonly blocksPerSM: number; readonly rowsPerStep: number }>>>> = {
  normRope: { nv1: { blocksPerSM: 4, rowsPerStep: 1 }, nv2: { blocksPerSM: 2, rowsPerStep: 1 } },
  ropePool: { nv1: { blocksPerSM: 2, rowsPerStep: 4 }, nv2: { blocksPerSM: 2, rowsPerStep: 1 } },
};

/** How a row kernel (fusedNormRopeStacked, ropePoolFused) is launched. */
export interface RowLaunch {
  readonly path: RowPath;
  readonly lanesPerRow: number;
  readonly block: number;
  readonly grid: number;
  /** Rows of one token per unit of work (vector paths). */
  readonly rowsPerUnit: number;
  readonly unitsPerToken: number;
  /** Each thread's cos/sin slots (vector paths). */
  readonly sharedBytes: number;
}

/** The block the vector kernels are built for. */
const BLOCK = 256;
/** More grid than this only adds scheduling: blocks per multiprocessor, for the element-by-element path. */
const ANY_SHAPE_BLOCKS_PER_SM = 32;

export interface RowShape {
  readonly kernel: RowKernel;
  readonly dtype: FloatDType;
  readonly headDim: number;
  readonly rotaryDim: number;
  readonly gptj: boolean;
  readonly tokens: number;
  /** Rows per token: L*H for the norm, Hq + 2H for the pool op. */
  readonly headRows: number;
  /** Every address read or written with 16-byte vectors. */
  readonly vectorAddresses: readonly number[];
  readonly multiprocessors: number;
}

/** Rows of one launch the vector path walks: its unit index is 32-bit (unit_walk.cuh), with room for a grid stride past the last unit. */
export const VECTOR_PATH_MAX_ROWS = 2 ** 31 - 1;

/**
 * The vector path needs rows of whole 16-byte vectors (and, for neox, halves
 * of the rotary part on vector boundaries), at most 32 lanes × 2 vectors, and
 * fewer than 2^31 rows; the element-by-element path indexes in 64 bits.
 */
export function vectorPathFits(s: Pick<RowShape, 'dtype' | 'headDim' | 'rotaryDim' | 'gptj' | 'vectorAddresses' | 'tokens' | 'headRows'>): boolean {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const numVec = s.headDim / vec;
  const fitsWalk = s.tokens * s.headRows <= VECTOR_PATH_MAX_ROWS;
  return fitsWalk && Number.isInteger(numVec) && numVec <= 64 && s.vectorAddresses.every((a) => a % 16 === 0) && (s.gptj || (s.rotaryDim / 2) % vec === 0);
}

/**
 * Lane groups (one row each) walk units of rowsPerUnit consecutive rows of a
 * token, grid-stride (src/cuda/unit_walk.cuh). A group fetches its cos/sin
 * once per unit, so units are as long as possible, but short enough that the
 * groups the GPU holds at once all have work: the unit length is the one that
 * minimises waves × (steps per unit + one step for the cos/sin), ties going
 * to shorter units (more groups at work). The grid holds just enough groups
 * for that many waves, in blocks of 256 (fewer when that leaves
 * multiprocessors idle).
 */
export function planRows(s: RowShape): RowLaunch {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const numVec = s.headDim / vec;
  if (!vectorPathFits(s)) {
    return {
      path: 'any',
      lanesPerRow: 32,
      block: 256,
      grid: Math.max(1, Math.min(Math.ceil((s.tokens * s.headRows) / 8), s.multiprocessors * ANY_SHAPE_BLOCKS_PER_SM)),
      rowsPerUnit: 0,
      unitsPerToken: 0,
      sharedBytes: 0,
    };
  }
  let lanes = 1;
  while (lanes < numVec && lanes < 32) lanes *= 2;
  const perLane = Math.ceil(numVec / lanes);
  const path = perLane === 1 ? 'nv1' : 'nv2';
  const { blocksPerSM, rowsPerStep } = ROW_KERNEL_SHAPES[s.kernel][path];
  const resident = s.multiprocessors * blocksPerSM * (BLOCK / lanes);
  let best = { cost: Infinity, rowsPerUnit: s.headRows, unitsPerToken: 1, waves: 1 };
  for (let unitsPerToken = s.headRows; unitsPerToken >= 1; unitsPerToken--) {
    const rowsPerUnit = Math.ceil(s.headRows / unitsPerToken);
    if (Math.ceil(s.headRows / rowsPerUnit) !== unitsPerToken) continue; // the same units as a smaller count
    const waves = Math.ceil((s.tokens * unitsPerToken) / resident);
    const cost = waves * (Math.ceil(rowsPerUnit / rowsPerStep) + 1);
    if (cost < best.cost) best = { cost, rowsPerUnit, unitsPerToken, waves };
  }
  const groups = Math.ceil((s.tokens * best.unitsPerToken) / best.waves);
  let block = BLOCK;
  while (block > 64 && Math.ceil(groups / (block / lanes)) < s.multiprocessors) block /= 2;
  return {
    path,
    lanesPerRow: lanes,
    block,
    grid: Math.ceil(groups / (block / lanes)),
    rowsPerUnit: best.rowsPerUnit,
    unitsPerToken: best.unitsPerToken,
    sharedBytes: block * 2 * perLane * vec * 4,
  };
}
