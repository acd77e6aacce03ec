/**
 * Multimodal RoPE (Qwen2-VL's mRoPE), host side: which of the three position
 * streams (temporal, height, width) feeds rotary pair j. `mropeSection`
 * [t, h, w] counts pairs: pairs j < t take the temporal position, t <= j < t+h
 * the height position, the rest the width position. In neox style pair j is
 * elements (j, j + R/2), so the section applies to both halves of a row, as
 * transformers' `apply_multimodal_rotary_pos_emb` does with its doubled split.
 */
import { writeCosSinRow } from './rope.js';
import type { RopeAngles, WritableNumbers } from './rope.js';

/** The pair indices where the stream changes: pairs below `[0]` are temporal, below `[1]` height, the rest width. */
export function mropeBounds(section: readonly number[]): readonly [number, number] {
  return [section[0]!, section[0]! + section[1]!];
}

/** The stream (0 temporal, 1 height, 2 width) whose position rotates pair j. */
export function mropeStreamOfPair(bounds: readonly [number, number], j: number): 0 | 1 | 2 {
  return j < bounds[0] ? 0 : j < bounds[1] ? 1 : 2;
}

let streamRow = new Float64Array(0);

/**
 * A token's cos ‖ sin row from the rows of its three streams: pair j (both
 * halves) from the row `fillStreamRow(s, row)` writes for j's stream s, so
 * a stream's row may come from angles or from a cache row at its position.
 */
export function writeMropeRow(out: WritableNumbers, offset: number, half: number, bounds: readonly [number, number], fillStreamRow: (stream: 0 | 1 | 2, row: Float64Array) => void): void {
  if (streamRow.length < 2 * half) streamRow = new Float64Array(2 * half);
  for (const s of [0, 1, 2] as const) {
    const from = s === 0 ? 0 : bounds[s - 1]!;
    const to = s === 2 ? half : bounds[s]!;
    if (from === to) continue;
    fillStreamRow(s, streamRow);
    for (let j = from; j < to; j++) {
      out[offset + j] = streamRow[j]!;
      out[offset + half + j] = streamRow[half + j]!;
    }
  }
}

/**
 * The cos ‖ sin row of a token whose streams sit at `positions` [temporal,
 * height, width]: pair j has the angles of its stream's position, the row
 * otherwise laid out as `writeCosSinRow` lays it out.
 */
export function writeMropeCosSinRow(out: WritableNumbers, offset: number, positions: readonly number[], bounds: readonly [number, number], angles: RopeAngles): void {
  writeMropeRow(out, offset, angles.frequencies.length, bounds, (s, row) => writeCosSinRow(row, 0, positions[s]!, angles));
}
