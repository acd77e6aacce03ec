import type { FloatDType } from '@kvkit/contracts';
import type { RowPath } from '../runtime/kernelNames.js';

/** How a row kernel (fusedNormRopeStacked, ropePoolFused) is launched. */
export interface RowLaunch {
  readonly path: RowPath;
  readonly lanesPerRow: number;
  readonly block: number;
  readonly gridX: number;
  readonly gridY: number;
  readonly tokensPerBlock: number;
  readonly headRowsPerBlock: number;
  readonly sharedBytes: number;
}

/** Static shared memory every block may use without opting in. */
const SHARED_LIMIT = 48 * 1024;
/** Most passes (rows per lane group) one block makes. */
const MAX_PASSES = 8;
/** More grid than this only adds scheduling: blocks per multiprocessor, for the element-by-element path. */
const ANY_SHAPE_BLOCKS_PER_SM = 32;

export interface RowShape {
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

/**
 * The fast path needs rows of whole 16-byte vectors (and, for neox, halves of
 * the rotary part on vector boundaries) held by at most 32 lanes × 2 vectors;
 * everything else takes the element-by-element kernel. A block covers
 * tokensPerBlock tokens × headRowsPerBlock of their rows, and stages their
 * cos/sin rows in shared memory.
 */
export function planRows(s: RowShape): RowLaunch {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const numVec = s.headDim / vec;
  const aligned = s.vectorAddresses.every((a) => a % 16 === 0);
  const neoxFits = s.gptj || (s.rotaryDim / 2) % vec === 0;
  let lanes = 1;
  while (lanes < numVec && lanes < 32) lanes *= 2;
  const perLane = Math.ceil(numVec / lanes);
  const maxTokensByShared = Math.floor((SHARED_LIMIT - 16) / (s.rotaryDim * 4 + 8));
  const totalRows = s.tokens * s.headRows;
  if (!Number.isInteger(numVec) || !aligned || !neoxFits || perLane > 2 || maxTokensByShared < 1) {
    return {
      path: 'any',
      lanesPerRow: 32,
      block: 256,
      gridX: Math.max(1, Math.min(Math.ceil(totalRows / 8), s.multiprocessors * ANY_SHAPE_BLOCKS_PER_SM)),
      gridY: 1,
      tokensPerBlock: 0,
      headRowsPerBlock: 0,
      sharedBytes: 0,
    };
  }
  // Enough blocks to cover every multiprocessor twice; few passes per block when the work is small.
  let block = 256;
  while (block > 64 && Math.ceil(totalRows / (block / lanes)) < 2 * s.multiprocessors) block /= 2;
  const groups = block / lanes;
  const passes = Math.max(1, Math.min(MAX_PASSES, Math.floor(totalRows / (groups * 2 * s.multiprocessors))));
  const target = groups * passes;
  let headRowsPerBlock = s.headRows;
  let tokensPerBlock = 1;
  if (target <= s.headRows) {
    headRowsPerBlock = target;
  } else {
    // Whole tokens per block; of the counts that fit, the one that leaves the fewest idle lanes in the last pass.
    let best = 0;
    for (let k = 1; k * s.headRows <= target; k++) {
      const rows = k * s.headRows;
      const used = rows / (Math.ceil(rows / groups) * groups);
      if (used >= best) {
        best = used;
        tokensPerBlock = k;
      }
    }
  }
  tokensPerBlock = Math.min(tokensPerBlock, maxTokensByShared, s.tokens);
  headRowsPerBlock = Math.max(headRowsPerBlock, Math.ceil(s.headRows / 65535));
  const cosSinBytes = Math.ceil((tokensPerBlock * s.rotaryDim * 4) / 16) * 16;
  return {
    path: perLane === 1 ? 'nv1' : 'nv2',
    lanesPerRow: lanes,
    block,
    gridX: Math.ceil(s.tokens / tokensPerBlock),
    gridY: Math.ceil(s.headRows / headRowsPerBlock),
    tokensPerBlock,
    headRowsPerBlock,
    sharedBytes: cosSinBytes + tokensPerBlock * 8,
  };
}
