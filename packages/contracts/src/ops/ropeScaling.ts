import { choice, errors, tagged } from '../dsl/declare.js';
import type { ContractFile, Step, TaggedField } from '../dsl/declare.js';

export const ropeScalingErrors = errors({
  KV060: {
    title: 'Unknown RoPE scaling type',
    message: '{arg} must be {expected}; got {actual}',
    fixes: [
      "Use one of the Hugging Face `rope_scaling` types kvkit implements: `'linear'`, `'dynamic'`, `'llama3'`, `'yarn'`, `'longrope'`.",
      "An older Phi-3 config names LongRoPE `'su'`: pass `type: 'longrope'` (transformers renames it the same way).",
      "Map the config's `rope_type` (or the older `type`) key to `type`; a config whose `rope_type` is `'default'` needs no `ropeScaling` at all.",
      'Pass an object (`{ type: ..., factor: ... }`), not the JSON string of one.',
    ],
  },
  KV061: {
    title: 'RoPE scaling field missing or unknown',
    message: '{arg} {problem} {variant} scaling, whose fields are {expected}',
    fixes: [
      'Rename the Hugging Face keys to kvkit\'s: `original_max_position_embeddings` → `originalMaxPositions`, `low_freq_factor` → `lowFreqFactor`, `high_freq_factor` → `highFreqFactor`, `beta_fast` → `betaFast`, `beta_slow` → `betaSlow`, `mscale_all_dim` → `mscaleAllDim`, `attention_factor` → `attentionFactor`, `short_factor` → `shortFactor`, `long_factor` → `longFactor`.',
      "Give every required field of the type: `'dynamic'`, `'llama3'`, `'yarn'` and `'longrope'` need `originalMaxPositions` (the config's `original_max_position_embeddings`, or its `max_position_embeddings` when the former is absent); `'longrope'` needs `shortFactor` and `longFactor` too.",
      'Drop keys that belong to another type or that kvkit does not read (`rope_type` itself goes to `type`).',
    ],
  },
  KV062: {
    title: 'RoPE scaling field out of range',
    message: '{arg} must be {constraint}; got {actual}',
    fixes: [
      'Convert config values with `Number(...)` and check them when the config is loaded: a string or `null` is not a number.',
      'Give `originalMaxPositions` and `sequenceLength` as positive integers (token counts).',
      'Give `attentionFactor`, `betaFast` and `betaSlow` as positive numbers, `mscale` and `mscaleAllDim` as numbers >= 0.',
    ],
  },
  KV063: {
    title: 'RoPE scaling fields that do not go together',
    message: '{arg}: {problem}',
    fixes: [
      "For `'llama3'`, keep `lowFreqFactor` below `highFreqFactor` (Llama 3.1 ships 1 and 4).",
      "For `'yarn'`, keep `betaSlow` at most `betaFast` (the defaults are 1 and 32; Kimi K2 has 1 and 1).",
      'With a ready `cosSinCache`, build the cache with the scaling already applied (`ropeCosSinCache`) and pass no `ropeScaling`.',
    ],
  },
  KV064: {
    title: 'RoPE scaling factor below 1',
    message: '{arg} = {actual} is below 1: a scaling factor stretches the context, and Hugging Face refuses one below 1 for every scaling type',
    fixes: [
      'Use the factor the model config gives: it stretches the context, so it is at least 1 (Llama 3.1: 8, Qwen2.5 with YaRN: 4).',
      'A factor of exactly 1 leaves plain RoPE (and YaRN its magnitude 1): omit `ropeScaling` instead.',
      'To compress positions rather than stretch them, scale the positions themselves; kvkit takes integer positions.',
    ],
  },
  KV084: {
    title: 'LongRoPE factors are not one per rotary pair',
    message: '{arg} must be a list of {expected} numbers, one per rotary pair; got {actual}',
    fixes: [
      "Pass the config's `rope_scaling.short_factor` and `long_factor` lists as they are: each holds `rotaryDim / 2` numbers (48 for Phi-3-mini and Phi-4-mini, whose rotary part is 96 elements).",
      'Give `rotaryDim` for a partial rotary: `headDim * partial_rotary_factor` (Phi-4-mini: 128 * 0.75 = 96), so the lists match `rotaryDim / 2`, not `headDim / 2`.',
      'Pass an array of numbers, not the JSON string of one, and not a single number for every pair.',
    ],
  },
  KV085: {
    title: 'A LongRoPE factor is not a finite number above 0',
    message: '{arg}[{index}] = {actual}; every factor must be {constraint}: it divides the frequency of its rotary pair',
    fixes: [
      'Convert each entry with `Number(...)` when the config is loaded, and check it: a string, `null` or `NaN` is not a factor.',
      'Keep every factor above 0: a factor of 0 gives an infinite frequency and a negative one turns the pair backwards.',
      "Take the lists from the model's own config: Phi-3's factors are all at least 1 (1 keeps a pair's plain frequency).",
    ],
  },
});

const factor: TaggedField = { doc: "How far the context is stretched (the config's `factor`), >= 1.", min: 1, boundCode: 'KV064' };
/** LongRoPE's factor lists: one per rotary pair. */
const longropeList = { halfOf: 'R', lengthCode: 'KV084', entryCode: 'KV085' } as const;
const originalMaxPositions: TaggedField = { doc: "The context the model was trained at (`original_max_position_embeddings`).", integer: true, above: 0 };

/**
 * The scaled-RoPE parameters, named as Hugging Face `rope_scaling` configs
 * are, and the angle convention. Every op that takes `ropeBase` takes these
 * steps right after it; the formulas are in backend/rope.ts.
 */
export const ropeScalingSteps = (): Step[] => [
  tagged('ropeScaling', {
    typeName: 'RopeScaling',
    doc: 'Scaled RoPE, as a Hugging Face `rope_scaling` config: linear, dynamic (NTK), llama3, yarn or longrope. Plain RoPE when omitted.',
    optional: true,
    tag: 'type',
    requires: 'ropeBase',
    variants: {
      linear: { doc: 'Position interpolation: every frequency divided by `factor`.', fields: { factor } },
      dynamic: {
        doc: 'Dynamic NTK: the base grown for a sequence longer than the original context. The sequence length is `sequenceLength`, or `factor * originalMaxPositions` when omitted; never read from the positions.',
        fields: {
          factor,
          originalMaxPositions,
          sequenceLength: { doc: 'The sequence length the base is grown for (Hugging Face uses max(position) + 1 of each forward); default `factor * originalMaxPositions`.', optional: true, integer: true, above: 0 },
        },
      },
      llama3: {
        doc: 'Llama 3.1 rescaling: long wavelengths divided by `factor`, short ones kept, a smooth blend between.',
        fields: {
          factor,
          lowFreqFactor: { doc: 'Wavelengths above `originalMaxPositions / lowFreqFactor` are divided by `factor` (`low_freq_factor`).', above: 0 },
          highFreqFactor: { doc: 'Wavelengths below `originalMaxPositions / highFreqFactor` are kept (`high_freq_factor`).', above: 0 },
          originalMaxPositions,
        },
      },
      yarn: {
        doc: 'YaRN: interpolation and extrapolation blended by a ramp over the pairs, and cos/sin scaled by the attention factor.',
        fields: {
          factor,
          originalMaxPositions,
          betaFast: { doc: 'Rotations in the original context above which a pair is extrapolated (`beta_fast`, default 32).', optional: true, default: 32, above: 0 },
          betaSlow: { doc: 'Rotations below which a pair is interpolated (`beta_slow`, default 1).', optional: true, default: 1, above: 0 },
          mscale: { doc: 'DeepSeek-style magnitude numerator (`mscale`).', optional: true, min: 0 },
          mscaleAllDim: { doc: 'DeepSeek-style magnitude denominator (`mscale_all_dim`).', optional: true, min: 0 },
          attentionFactor: { doc: 'The magnitude on cos and sin (`attention_factor`); default 0.1·ln(factor) + 1.', optional: true, above: 0 },
        },
      },
      longrope: {
        doc: 'LongRoPE (Phi-3, Phi-4-mini): each frequency divided by its own factor, the long factors for a sequence past the original context, and cos/sin scaled by the attention factor.',
        fields: {
          shortFactor: { doc: 'Per-pair divisors of the frequencies up to the original context (`short_factor`): R/2 numbers > 0.', list: longropeList, above: 0 },
          longFactor: { doc: 'Per-pair divisors past the original context (`long_factor`): R/2 numbers > 0.', list: longropeList, above: 0 },
          // The default attention factor divides by ln(originalMaxPositions): a context of 1 token would make it infinite.
          originalMaxPositions: { ...originalMaxPositions, above: 1 },
          factor: { ...factor, optional: true, doc: "How far the context is stretched, >= 1: the config's `factor`, or `max_position_embeddings / original_max_position_embeddings`; it sets the default attention factor (1 when omitted)." },
          attentionFactor: { doc: 'The magnitude on cos and sin (`attention_factor`); default sqrt(1 + ln(factor) / ln(originalMaxPositions)), 1 for factor 1.', optional: true, above: 0 },
          sequenceLength: { doc: 'The sequence length that picks the factors: longFactor above originalMaxPositions, else shortFactor (Hugging Face uses max(position) + 1 of each forward, vLLM its max_model_len); default `factor * originalMaxPositions`.', optional: true, integer: true, above: 0 },
        },
      },
    },
    orders: [
      { variant: 'llama3', lower: 'lowFreqFactor', upper: 'highFreqFactor' },
      // Kimi K2 ships betaFast = betaSlow = 1: the ramp is then a step, as transformers computes it.
      { variant: 'yarn', lower: 'betaSlow', upper: 'betaFast', equalAllowed: true },
    ],
    code: 'KV060',
    fieldCode: 'KV061',
    valueCode: 'KV062',
    comboCode: 'KV063',
  }),
  choice('angles', {
    options: ['exact', 'float32'],
    default: 'exact',
    code: 'KV009',
    doc: "'exact': cos and sin of p·f_j with the angle reduced exactly, any position below 2^31; 'float32': the angle as transformers, vLLM and SGLang round it (f32 frequencies, the product in f32).",
  }),
];

/** The codes of RoPE scaling; the ops that take `ropeBase` raise them through `ropeScalingSteps`, and the cache builder too. */
export const ropeScaling: ContractFile = {
  errors: ropeScalingErrors,
  ops: [],
  calls: [
    {
      name: 'ropeCosSinCache',
      summary: 'A [P, R] cos/sin cache with the angles ropePoolFused computes from the same ropeBase, ropeScaling and angles.',
      raises: ['KV004', 'KV006', 'KV007', 'KV008', 'KV009', 'KV043', 'KV044', 'KV060', 'KV061', 'KV062', 'KV063', 'KV064', 'KV084', 'KV085'],
    },
  ],
};
