import { errors, flag, interleavedSection, ints } from '../dsl/declare.js';
import type { Step, TensorArg } from '../dsl/declare.js';

/**
 * Multimodal RoPE (Qwen2-VL): three position streams (temporal, height,
 * width), each feeding a contiguous run of rotary pairs. The steps here are
 * shared by every op that takes positions for RoPE; `mropePositions` turns an
 * op's `[N]` positions step into one that also takes `[3, N]`.
 */
export const mropeErrors = errors({
  KV065: {
    title: 'mropeSection is not three counts summing to R/2',
    message: '{arg} must be {expected}; got {actual}',
    fixes: [
      "Pass the model config's `rope_scaling.mrope_section` as it is: `[16, 24, 24]` for Qwen2-VL and Qwen2.5-VL with head_dim 128.",
      'The counts are rotary pairs, not elements: they sum to `rotaryDim / 2`, once for both halves of a neox row.',
      'Give whole numbers, one per stream (temporal, height, width), none negative.',
    ],
  },
  KV066: {
    title: 'positions has three streams but mropeSection is missing',
    message: '{arg} has shape {actual}, the [3, N] streams of mRoPE; pass mropeSection, or give {expected}',
    fixes: [
      "Pass `mropeSection` from the model config's `rope_scaling.mrope_section` (e.g. `[16, 24, 24]`).",
      'For a text-only model, pass the `[N]` positions of the single stream.',
      'For text tokens of an mRoPE model, the three streams hold the same position: `[3, N]` with equal rows, plus `mropeSection`.',
    ],
  },
  KV067: {
    title: 'mropeSection is given but positions is not [3, N]',
    message: '{arg} has shape {actual}; with mropeSection it must be {expected}: temporal, height and width positions',
    fixes: [
      'Build positions as `[3, N]`: row 0 temporal, row 1 height, row 2 width, one column per token, as `get_rope_index` of Qwen2-VL returns them (batch axis dropped).',
      'For a model without multimodal RoPE, drop `mropeSection` and pass `[N]` positions.',
      'Keep the stream axis first: a `[N, 3]` tensor is the transpose of what is needed.',
    ],
  },
  KV086: {
    title: 'mropeInterleaved without mropeSection',
    message: '{arg} is true but {other} is missing: the interleaved layout spreads the section counts over the rotary pairs, so it needs them',
    fixes: [
      "Pass the model config's `rope_scaling.mrope_section` beside it: `mropeSection: [24, 20, 20], mropeInterleaved: true` for Qwen3-VL with head_dim 128.",
      'For a text-only batch, either keep both and give `[3, N]` positions with equal rows, or drop both and give `[N]` positions: every stream then holds the same position.',
      'Set `mropeInterleaved` from the config\'s `mrope_interleaved` only where that config also has `mrope_section`.',
    ],
  },
  KV087: {
    title: 'mropeSection does not fit the interleaved layout',
    message: '{arg} = {actual} does not fit interleaved among R/2 = {expected} rotary pairs: {problem}',
    fixes: [
      "Use the section of the model's own config: Qwen3-VL's `[24, 20, 20]` for head_dim 128; Qwen2-VL's `[16, 24, 24]` is a contiguous layout and leaves `mropeInterleaved` out.",
      'Interleaved, height takes pairs 1, 4, 7, ... and width pairs 2, 5, 8, ...: keep `3 * height <= R/2 + 1` and `3 * width <= R/2`.',
      'For a partial rotary, count pairs of `rotaryDim`, not of `headDim`.',
    ],
  },
});

export const mropeSection = ints('mropeSection', {
  length: 3,
  sumsToHalfOf: 'R',
  optional: true,
  code: 'KV065',
  doc: 'mRoPE: rotary pairs per position stream [temporal, height, width], summing to R/2; positions is then [3, N].',
});

/** Qwen3-VL's layout of the section: the streams take turns over the pairs instead of running one after another. */
export const mropeInterleaved = flag('mropeInterleaved', {
  default: false,
  code: 'KV044',
  doc: "mRoPE's interleaved layout (Qwen3-VL's `mrope_interleaved`): pair j takes the height position where j % 3 == 1 and j < 3·mropeSection[1], the width one where j % 3 == 2 and j < 3·mropeSection[2], the temporal one elsewhere.",
});

/** mRoPE as every op takes it: the section, the interleaved flag beside it, and their fit among the R/2 pairs. */
export const mropeSteps: readonly Step[] = [
  mropeSection,
  mropeInterleaved,
  interleavedSection({ flag: 'mropeInterleaved', section: 'mropeSection', halfOf: 'R', missingCode: 'KV086', code: 'KV087' }),
];

/** An op's `[N]` positions that also take mRoPE's `[3, N]` streams when `mropeSection` is given (ropePoolFused, fusedNormRopeStacked, the materializer). */
export const mropePositions = (positions: TensorArg): TensorArg => ({
  ...positions,
  streams: { count: 3, by: 'mropeSection', code: 'KV067', unexpectedCode: 'KV066' },
  doc: `${positions.doc} With mropeSection: [3, ${positions.shape[0]}], temporal, height and width positions.`,
});
