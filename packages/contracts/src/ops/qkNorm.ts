import { errors, number, requires, sameAs, tensor } from '../dsl/declare.js';
import type { Step } from '../dsl/declare.js';

/**
 * Q/K-norm (Qwen3, Gemma 3, OLMo 2 style per-head RMSNorm before RoPE):
 * optional weights of one head row each, and the eps they need.
 */
export const qkNormErrors = errors({
  KV068: {
    title: 'qNormWeight or kNormWeight is not [D]',
    message: '{arg} has shape {actual}; expected {expected}, one weight per element of a head',
    fixes: [
      "Pass the layer's `q_norm.weight` / `k_norm.weight` (Qwen3, Gemma 3): one row of `headDim` values, shared by every head.",
      'A norm over the whole projection (`[H*D]` weights, as OLMo 2 has) is not a per-head norm: apply it before this op.',
      "For a stack of layers, pass the current layer's row, `weights[l]`, not the `[L, D]` stack.",
    ],
  },
  KV069: {
    title: 'eps and the Q/K-norm weights go together',
    message: 'got {actual}; eps is required with {expected}, and only with them',
    fixes: [
      "Pass `eps` from the model config's `rms_norm_eps` (e.g. `1e-6`) together with `qNormWeight` and/or `kNormWeight`.",
      'Without a Q/K-norm, drop `eps`: plain RoPE needs none.',
    ],
  },
});

/** The Q/K-norm arguments of an op whose queries are `q`: each weight optional, `eps` exactly when one is given. */
export const qkNormSteps = (): Step[] => [
  tensor('qNormWeight', { dtype: sameAs('q', 'f32'), shape: ['D'], code: 'KV068', optional: true, doc: "RMSNorm weight of every query head before RoPE (Qwen3's q_norm.weight); q's dtype or f32." }),
  tensor('kNormWeight', { dtype: sameAs('q', 'f32'), shape: ['D'], code: 'KV068', optional: true, doc: "RMSNorm weight of every key head before RoPE (Qwen3's k_norm.weight); q's dtype or f32." }),
  number('eps', { min: 0, optional: true, code: 'KV008', doc: 'RMSNorm epsilon of the Q/K-norm (rms_norm_eps); required with a norm weight.' }),
  requires('eps', ['qNormWeight', 'kNormWeight'], 'KV069'),
];
