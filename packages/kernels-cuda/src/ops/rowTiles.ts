import type { FloatDType } from '@kvkit/contracts';
import { LAUNCHES } from '../generated/kernels.js';
import type { RowPath } from '../runtime/kernelNames.js';

/** The two row kernels: fused norm + RoPE (K and V per row) and RoPE + pool scatter (one tensor per row). */
export type RowKernel = 'normRope' | 'ropePool';

/** The declared launch of each row kernel (@kvkit/contracts/kernels, by kernel name). */
const ROW_LAUNCHES = { normRope: LAUNCHES.fusedNormRope, ropePool: LAUNCHES.ropePool } as const;

/**
 * What the vector kernels are built for (their declared launches, which the
 * entry points in src/cuda/*.cu take their __launch_bounds__ and template
 * arguments from): blocks resident per multiprocessor, and rows a lane group
 * takes per step.
 */
export const ROW_KERNEL_SHAPES: Readonly<Record<RowKernel, Readonly<Record<'nv1' | 'nv2', { readonly blocksPerSM: number; readonly rowsPerStep: number }>>>> = {
  normRope: vectorShapes('normRope'),
  ropePool: vectorShapes('ropePool'),
};

function vectorShapes(kernel: RowKernel) {
  const { nv1, nv2 } = ROW_LAUNCHES[kernel];
  return {
    nv1: { blocksPerSM: nv1.minBlocksPerSM, rowsPerStep: nv1.rowsPerStep },
    nv2: { blocksPerSM: nv2.minBlocksPerSM, rowsPerStep: nv2.rowsPerStep },
  };
}

/** How a row kernel (fusedNormRopeStacked, ropePoolFused) is launched. */
export interface RowLaunch {
  readonly path: RowPath;
  readonly lanesPerRow: number;
  readonly block: number;
  readonly grid: number;
  /** Tokens per block (ropePool's token tiles, its nv1 path); 0 elsewhere. */
  readonly tokensPerBlock: number;
  /** Lanes each hold a vector and its neox partner (the nv1 path's `_paired` builds); false elsewhere. */
  readonly pairedLanes: boolean;
  /** Rows of one token per unit of work (vector paths). */
  readonly rowsPerUnit: number;
  readonly unitsPerToken: number;
  /** Dynamic shared memory of a block: cos/sin slots (vector paths), rows in flight and norm weights (token tiles). */
  readonly sharedBytes: number;
  /** Blocks of this launch a multiprocessor holds at once, as the grid is sized for (0: the element-by-element path). */
  readonly blocksPerMultiprocessor: number;
}

/**
 * What a launch must fit in on the GPU at hand (cuDeviceGetAttribute): the row
 * kernels take their shared memory without opting in past the per-block default.
 */
export interface GpuLimits {
  readonly multiprocessors: number;
  /** Shared memory one block may take (48 KiB on every GPU from sm_80 on). */
  readonly sharedBytesPerBlock: number;
  /** Shared memory of a multiprocessor: 164 KiB on sm_80, 100 KiB on sm_86, sm_89 and sm_120, 228 KiB on sm_90 and sm_100. */
  readonly sharedBytesPerMultiprocessor: number;
  /** What the driver keeps of it for each resident block (1 KiB from sm_80 on). */
  readonly reservedSharedBytesPerBlock: number;
}

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
  /** Every address read or written with 16-byte vectors, and every byte stride between such rows. */
  readonly vectorAddresses: readonly number[];
  /** Element strides within the rows read (views); the vector path needs them all 1. */
  readonly elementStrides?: readonly number[];
  readonly gpu: GpuLimits;
}

/** Where the head rows of a [tokens, heads, D] view sit, in elements (a dim of size 1 steps nowhere: 0). */
export interface RowStrides {
  readonly token: number;
  readonly head: number;
  readonly element: number;
}

export function rowStrides(t: { readonly shape: readonly number[]; readonly strides: readonly number[] }): RowStrides {
  const [tokens, heads, D] = t.shape as [number, number, number];
  const [token, head, element] = t.strides as [number, number, number];
  return { token: tokens === 1 ? 0 : token, head: heads === 1 ? 0 : head, element: D === 1 ? 1 : element };
}

/** Rows of one launch the vector path walks: its unit index is 32-bit (unit_walk.cuh), with room for a grid stride past the last unit. */
export const VECTOR_PATH_MAX_ROWS = 2 ** 31 - 1;

/**
 * The vector path needs rows of whole 16-byte vectors (and, for neox, halves
 * of the rotary part on vector boundaries), contiguous and 16-byte aligned,
 * at most 32 lanes × 2 vectors, and fewer than 2^31 rows; the
 * element-by-element path indexes in 64 bits and reads any strides.
 */
export function vectorPathFits(s: Pick<RowShape, 'dtype' | 'headDim' | 'rotaryDim' | 'gptj' | 'vectorAddresses' | 'elementStrides' | 'tokens' | 'headRows'>): boolean {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const numVec = s.headDim / vec;
  const fitsWalk = s.tokens * s.headRows <= VECTOR_PATH_MAX_ROWS;
  const rowsContiguous = (s.elementStrides ?? []).every((e) => e === 1);
  return fitsWalk && rowsContiguous && Number.isInteger(numVec) && numVec <= 64 && s.vectorAddresses.every((a) => a % 16 === 0) && (s.gptj || (s.rotaryDim / 2) % vec === 0);
}

/**
 * Lane groups (one row each) walk units of rowsPerUnit consecutive rows of a
 * token, grid-stride (src/cuda/unit_walk.cuh). A group fetches its cos/sin
 * once per unit, so units are as long as possible, but short enough that the
 * groups the GPU holds at once all have work: the unit length is the one that
 * minimises waves × (steps per unit + one step for the cos/sin), ties going
 * to shorter units (more groups at work), the GPU holding the declared
 * blocks a multiprocessor as far as their shared memory fits. The grid holds
 * just enough groups for that many waves, in blocks of the declared threads
 * (fewer when that leaves multiprocessors idle).
 */
export function planRows(s: RowShape): RowLaunch {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const numVec = s.headDim / vec;
  if (!vectorPathFits(s)) {
    return {
      path: 'any',
      lanesPerRow: 32,
      block: ROW_LAUNCHES[s.kernel].any.threads,
      grid: Math.max(1, Math.min(Math.ceil((s.tokens * s.headRows) / 8), s.gpu.multiprocessors * ANY_SHAPE_BLOCKS_PER_SM)),
      tokensPerBlock: 0,
      pairedLanes: false,
      rowsPerUnit: 0,
      unitsPerToken: 0,
      sharedBytes: 0,
      blocksPerMultiprocessor: 0,
    };
  }
  let lanes = 1;
  while (lanes < numVec && lanes < 32) lanes *= 2;
  const perLane = Math.ceil(numVec / lanes);
  const path = perLane === 1 ? 'nv1' : 'nv2';
  const declared = ROW_KERNEL_SHAPES[s.kernel][path];
  const threads = ROW_LAUNCHES[s.kernel][path].threads;
  const pairs = path === 'nv1' && pairedLanesFit(s, numVec);
  if (s.kernel === 'ropePool' && path === 'nv1') return planTokenTiles(s, lanes, pairs, threads, declared.blocksPerSM);
  // The norm kernel pairs its rows only where they fill the GPU once: fewer rows spread over more blocks unpaired
  // (bf16 L = 5 T = 16: 4.5 µs unpaired, 5.2 µs paired on the H200).
  const paired = pairs && s.tokens * s.headRows >= s.gpu.multiprocessors * LAUNCHES.fusedNormRope.paired.minBlocksPerSM * (threads / (lanes / 2));
  // The norm kernel's paired rows have a launch of their own (fewer blocks, more registers).
  const launch = paired ? LAUNCHES.fusedNormRope.paired : ROW_LAUNCHES[s.kernel][path];
  const rowsPerStep = paired ? LAUNCHES.fusedNormRope.paired.rowsPerStep : declared.rowsPerStep;
  // Paired (the `_paired` build of nv1): half the lanes a row, two vectors each.
  const rowLanes = paired ? lanes / 2 : lanes;
  // Each thread's cos/sin slots (f32 cos and sin of each element of its vectors; paired: of the lower one, which its partner shares).
  const slotBytesPerThread = 2 * (paired ? 1 : perLane) * vec * 4;
  const blocksPerSM = residentBlocks(s.gpu, launch.minBlocksPerSM, threads * slotBytesPerThread);
  const resident = s.gpu.multiprocessors * blocksPerSM * (threads / rowLanes);
  let best = { cost: Infinity, rowsPerUnit: s.headRows, unitsPerToken: 1, waves: 1 };
  for (let unitsPerToken = s.headRows; unitsPerToken >= 1; unitsPerToken--) {
    const rowsPerUnit = Math.ceil(s.headRows / unitsPerToken);
    if (Math.ceil(s.headRows / rowsPerUnit) !== unitsPerToken) continue; // the same units as a smaller count
    const waves = Math.ceil((s.tokens * unitsPerToken) / resident);
    const cost = waves * (Math.ceil(rowsPerUnit / rowsPerStep) + 1);
    if (cost < best.cost) best = { cost, rowsPerUnit, unitsPerToken, waves };
  }
  const groups = Math.ceil((s.tokens * best.unitsPerToken) / best.waves);
  let block = threads;
  while (block > 64 && Math.ceil(groups / (block / rowLanes)) < s.gpu.multiprocessors) block /= 2;
  return {
    path,
    lanesPerRow: rowLanes,
    block,
    grid: Math.ceil(groups / (block / rowLanes)),
    tokensPerBlock: 0,
    pairedLanes: paired,
    rowsPerUnit: best.rowsPerUnit,
    unitsPerToken: best.unitsPerToken,
    sharedBytes: block * slotBytesPerThread,
    blocksPerMultiprocessor: blocksPerSM,
  };
}

/** Blocks a multiprocessor holds at once: the declared ones, as far as their shared memory (and the driver's share for each) fits. */
function residentBlocks(gpu: GpuLimits, declared: number, sharedBytes: number): number {
  return Math.min(declared, Math.floor(gpu.sharedBytesPerMultiprocessor / (sharedBytes + gpu.reservedSharedBytesPerBlock)));
}

/**
 * Rows of one vector a lane are held in pairs instead (a vector and its rotation partner R/2 on, in one
 * lane: the `_paired` builds, PAIRED in rope_pool_tiles.cuh and fused_norm_rope.cu) for neox over the
 * whole row: no shuffle fetches the partner, and a lane's bookkeeping and bytes in flight cover two vectors.
 */
function pairedLanesFit(s: RowShape, numVec: number): boolean {
  return !s.gptj && s.rotaryDim === s.headDim && numVec >= 2 && (numVec & (numVec - 1)) === 0;
}

/** The most tokens one tile takes: on the H200 (bf16, 48 rows a token) 8 beat 4, 16 and 32 at N = 4096 and 32768. */
const MAX_TOKENS_PER_TILE = 8;

/** Shared memory for the rows a token tile's threads have loading: stagedBatches batches of rowsPerStep 16-byte vectors each. */
function tokenTileStagingBytes(threads: number): number {
  const { rowsPerStep, stagedBatches } = LAUNCHES.ropePool.nv1;
  return stagedBatches * rowsPerStep * threads * 16;
}

/**
 * ropePool's token tiles (src/cuda/rope_pool_tiles.cuh): a block per tile of
 * consecutive tokens, its rows in flight, norm weights, cos/sin and slots in
 * shared memory. Tiles are as large as they can be (a block's fixed costs,
 * the cos/sin pass and the two barriers, spread over more rows) while their
 * shared memory stays within a block's, a larger tile costs no block resident
 * on a multiprocessor, and the grid still fills the GPU once.
 */
function planTokenTiles(s: RowShape, lanes: number, pairedLanes: boolean, threads: number, declaredBlocksPerSM: number): RowLaunch {
  const { gpu } = s;
  // The tile's float2 cos/sin slots per token (TileAngles in rope_pool_tiles.cuh): gptj rounds the pairs up to whole vectors.
  const halfR = s.rotaryDim >> 1;
  const pairsPerVector = (s.dtype === 'f32' ? 4 : 8) / (s.gptj ? 2 : 1);
  const slots = s.gptj ? Math.ceil(halfR / pairsPerVector) * pairsPerVector : halfR;
  // The rows staged in flight, the Q- and K-norm weights (f32), cos and sin (f32) of every (token, pair) of the tile, its slots (i64).
  const sharedBytes = (tokensPerBlock: number) => tokenTileStagingBytes(threads) + 2 * s.headDim * 4 + tokensPerBlock * (slots * 8 + 8);
  // On 100 KiB multiprocessors (sm_86, sm_89, sm_120) the staged rows alone keep two of the declared blocks out.
  const resident = (tokensPerBlock: number) => residentBlocks(gpu, declaredBlocksPerSM, sharedBytes(tokensPerBlock));
  const most = resident(1);
  let tokensPerBlock = MAX_TOKENS_PER_TILE;
  while (
    tokensPerBlock > 1 &&
    (sharedBytes(tokensPerBlock) > gpu.sharedBytesPerBlock || resident(tokensPerBlock) < most || Math.ceil(s.tokens / tokensPerBlock) < gpu.multiprocessors * most)
  )
    tokensPerBlock /= 2;
  return {
    path: 'nv1',
    lanesPerRow: pairedLanes ? lanes / 2 : lanes,
    block: threads,
    grid: Math.ceil(s.tokens / tokensPerBlock),
    tokensPerBlock,
    pairedLanes,
    rowsPerUnit: 0,
    unitsPerToken: 0,
    sharedBytes: sharedBytes(tokensPerBlock),
    blocksPerMultiprocessor: resident(tokensPerBlock),
  };
}
