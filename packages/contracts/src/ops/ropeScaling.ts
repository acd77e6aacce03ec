import { choice, errors, tagged } from '../dsl/declare.js';
import type { ContractFile, Step, TaggedField } from '../dsl/declare.js';

export const ropeScalingErrors = errors({
  KV060: {
    title: 'Unknown RoPE scaling type',
    message: '{arg} must be {expected}; got {actual}',
    fixes: [
      "Use one of the Hugging Face `rope_scaling` types kvkit implements: `'linear'`, `'dynamic'`, `'llama3'`, `'yarn'`.",
      "Map the config's `rope_type` (or the older `type`) key to `type`; a config whose `rope_type` is `'default'` needs no `ropeScaling` at all.",
      'Pass an object (`{ type: ..., factor: ... }`), not the JSON string of one.',
    ],
  },
  KV061: {
    title: 'RoPE scaling field missing or unknown',
    message: '{arg} {problem} {variant} scaling, whose fields are {expected}',
    fixes: [
      'Rename the Hugging Face keys to kvkit\'s: `original_max_position_embeddings` → `originalMaxPositions`, `low_freq_factor` → `lowFreqFactor`, `high_freq_factor` → `highFreqFactor`, `beta_fast` → `betaFast`, `beta_slow` → `betaSlow`, `mscale_all_dim` → `mscaleAllDim`, `attention_factor` → `attentionFactor`.',
      "Give every required field of the type: `'dynamic'`, `'llama3'` and `'yarn'` need `originalMaxPositions` (the config's `original_max_position_embeddings`, or its `max_position_embeddings` when the former is absent).",
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
      "For `'yarn'`, keep `betaSlow` below `betaFast` (the defaults are 1 and 32).",
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
});

const factor: TaggedField = { doc: "How far the context is stretched (the config's `factor`), >= 1.", min: 1, boundCode: 'KV064' };
const originalMaxPositions: TaggedField = { doc: "The context the model was trained at (`original_max_position_embeddings`).", integer: true, above: 0 };

/**
 * The scaled-RoPE parameters, named as Hugging Face `rope_scaling` configs
 * are, and the angle convention. Every op that takes `ropeBase` takes these
 * steps right after it; the formulas are in backend/rope.ts.
 */
export const ropeScalingSteps = (): Step[] => [
  tagged('ropeScaling', {
    typeName: 'RopeScaling',
    doc: 'Scaled RoPE, as a Hugging Face `rope_scaling` config: linear, dynamic (NTK), llama3 or yarn. Plain RoPE when omitted.',
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
    },
    orders: [
      { variant: 'llama3', lower: 'lowFreqFactor', upper: 'highFreqFactor' },
      { variant: 'yarn', lower: 'betaSlow', upper: 'betaFast' },
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
      raises: ['KV004', 'KV006', 'KV007', 'KV008', 'KV009', 'KV043', 'KV044', 'KV060', 'KV061', 'KV062', 'KV063', 'KV064'],
    },
  ],
};
