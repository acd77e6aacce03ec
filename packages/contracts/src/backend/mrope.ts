/**
 * Multimodal RoPE (Qwen2-VL's mRoPE), host side: which of the three position
 * streams (temporal, height, width) feeds rotary pair j. `mropeSection`
 * [t, h, w] counts pairs: pairs j < t take the temporal position, t <= j < t+h
 * the height position, the rest the width position. In neox style pair j is
 * elements (j, j + R/2), so the section applies to both halves of a row, as
 * transformers' `apply_multimodal_rotary_pos_emb` does with its doubled split.
 *
 * Interleaved (Qwen3-VL's `mrope_interleaved`, transformers'
 * `apply_interleaved_mrope`): pair j takes the height position where
 * j % 3 == 1 and j < 3h, the width position where j % 3 == 2 and j < 3w, the
 * temporal position elsewhere; the counts are the same [t, h, w].
 */
import { writeCosSinRow } from './rope.js';
import type { RopeAngles, WritableNumbers } from './rope.js';

/** The pair indices where the stream changes: pairs below `[0]` are temporal, below `[1]` height, the rest width. */
export function mropeBounds(section: readonly number[]): readonly [number, number] {
  return [section[0]!, section[0]! + section[1]!];
}

/**
 * How pairs map to streams, as the device kernels take it: contiguous runs
 * that change at `ends` [t, t + h], or interleaved with `ends` [3h, 3w], the
 * ends of the height and width strides.
 */
export interface MropeLayout {
  readonly interleaved: boolean;
  readonly ends: readonly [number, number];
}

/** The layout of a section: contiguous (Qwen2-VL) or interleaved (Qwen3-VL). */
export function mropeLayout(section: readonly number[], interleaved = false): MropeLayout {
  return { interleaved, ends: interleaved ? [3 * section[1]!, 3 * section[2]!] : mropeBounds(section) };
}

/** Contiguous bounds (the form `mropeBounds` returns) or a layout. */
export type MropeStreams = readonly [number, number] | MropeLayout;

const layoutOf = (streams: MropeStreams): MropeLayout => ('interleaved' in streams ? streams : { interleaved: false, ends: streams });

/** The stream (0 temporal, 1 height, 2 width) whose position rotates pair j. */
export function mropeStreamOfPair(streams: MropeStreams, j: number): 0 | 1 | 2 {
  const { interleaved, ends } = layoutOf(streams);
  if (!interleaved) return j < ends[0] ? 0 : j < ends[1] ? 1 : 2;
  return j % 3 === 1 && j < ends[0] ? 1 : j % 3 === 2 && j < ends[1] ? 2 : 0;
}

let streamRow = new Float64Array(0);

/**
 * A token's cos ‖ sin row from the rows of its three streams: pair j (both
 * halves) from the row `fillStreamRow(s, row)` writes for j's stream s, so
 * a stream's row may come from angles or from a cache row at its position.
 * A stream no pair takes is never filled.
 */
export function writeMropeRow(out: WritableNumbers, offset: number, half: number, streams: MropeStreams, fillStreamRow: (stream: 0 | 1 | 2, row: Float64Array) => void): void {
  if (streamRow.length < 2 * half) streamRow = new Float64Array(2 * half);
  const layout = layoutOf(streams);
  for (const s of [0, 1, 2] as const) {
    let filled = false;
    for (let j = 0; j < half; j++) {
      if (mropeStreamOfPair(layout, j) !== s) continue;
      if (!filled) fillStreamRow(s, streamRow);
      filled = true;
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
export function writeMropeCosSinRow(out: WritableNumbers, offset: number, positions: readonly number[], streams: MropeStreams, angles: RopeAngles): void {
  writeMropeRow(out, offset, angles.frequencies.length, streams, (s, row) => writeCosSinRow(row, 0, positions[s]!, angles));
}
