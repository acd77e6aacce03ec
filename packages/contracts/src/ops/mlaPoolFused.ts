import { choice, contiguous, distinct, errors, F32, FLOAT, FP8, givenForDtype, INDEX, int, number, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { scaleValues } from './kvPools.js';
import { ropeScalingSteps } from './ropeScaling.js';

/**
 * Multi-head latent attention's cache write (DeepSeek-V2/V3, Kimi K2): each
 * token's compressed KV `[c_kv (C), k_pe (R)]`, as kv_a_proj_with_mqa gives
 * it, becomes one pool row `[RMSNorm(c_kv) · w, RoPE(k_pe)]` of a pool with
 * one head, and the queries' RoPE part is rotated with the same angles. The
 * pool is kvkit's pool with H = 1 and D = C + R, so dequantizeKv, copySlots
 * and pagedAttention (with vHeadDim = C) read it as any other.
 */
export const mlaPoolFusedErrors = errors({
  KV090: {
    title: 'kvLatent is not [N, kvLoraRank + qkRopeHeadDim]',
    message: '{arg} has shape {actual}; expected {expected}: per token the kvLoraRank latent values, then the qkRopeHeadDim RoPE values',
    fixes: [
      "Pass the output of the layer's `kv_a_proj_with_mqa` as it is: `[N, kv_lora_rank + qk_rope_head_dim]` (576 for DeepSeek-V3 and Kimi K2), before `kv_a_layernorm` and before any split.",
      'Take `kvLoraRank` from the config\'s `kv_lora_rank` and `qkRopeHeadDim` from `qk_rope_head_dim`, not `qk_nope_head_dim` or `v_head_dim`.',
      'Where the projection is fused with the query\'s (`fused_qkv_a_proj_with_mqa`, `[N, q_lora_rank + C + R]`), pass a view of its last `C + R` columns: `backend.view(fused, [N, C + R], { strides: [qLora + C + R, 1], offset: qLora })`.',
    ],
  },
  KV091: {
    title: 'kvNormWeight is not [kvLoraRank]',
    message: '{arg} has shape {actual}; expected {expected}: one weight per latent value',
    fixes: [
      "Pass the layer's `kv_a_layernorm.weight`, `[kv_lora_rank]`: the RMSNorm covers the latent part only, never the RoPE part.",
      "For a stack of layers, pass the current layer's weight, not the `[L, C]` stack.",
      'Keep the weight in the latent\'s dtype or in f32.',
    ],
  },
  KV092: {
    title: 'q is not [N, numQoHeads, qk_nope_head_dim + qkRopeHeadDim]',
    message: '{arg} has shape {actual}; expected {expected}: every query head ends with its qkRopeHeadDim RoPE values',
    fixes: [
      "Pass the queries as `q_b_proj` (or `q_proj`) gives them, viewed `[N, num_heads, qk_nope_head_dim + qk_rope_head_dim]` (`[N, 128, 192]` for DeepSeek-V3), with the same N as kvLatent.",
      'Under tensor parallelism, pass the query heads of this rank, and the same count as `numQoHeads`.',
      'Leave `q` out to write the pool only; `qRot` is then not returned.',
    ],
  },
  KV093: {
    title: "q's head dim is below qkRopeHeadDim",
    message: "{arg} has shape {actual}: its head dim {value} is below qkRopeHeadDim = {expected}, the RoPE part that ends every query head",
    fixes: [
      'Check the last dim of `q`: it is `qk_nope_head_dim + qk_rope_head_dim` (192 for DeepSeek-V3), or `kv_lora_rank + qk_rope_head_dim` (576) for queries already absorbed into the latent space.',
      'Pass `q` before it is split into `q_nope` and `q_pe`; only the last `qkRopeHeadDim` values of each head are rotated, the others are copied.',
      'Take `qkRopeHeadDim` from `qk_rope_head_dim` (64), not `qk_head_dim`.',
    ],
  },
  KV094: {
    title: 'MLA pool is not [S, 1, kvLoraRank + qkRopeHeadDim]',
    message: '{arg} has shape {actual}; expected {expected}: one head of kvLoraRank + qkRopeHeadDim values a slot',
    fixes: [
      "Allocate the layer's latent cache as `backend.empty(dtype, [S, 1, kvLoraRank + qkRopeHeadDim])`, or with `layout: 'HND'` as `[numPages, 1, pageSize, kvLoraRank + qkRopeHeadDim]` (the same bytes: a pool of one head).",
      "A vLLM MLA cache `[num_blocks, block_size, C + R]` is this pool as a view: `backend.view(cache, [num_blocks * block_size, 1, C + R])`; SGLang's `[size, 1, C + R]` is it as it is.",
      'Keep the latent and its RoPE part in one row: FlashInfer\'s split `ckv_cache` / `kpe_cache` pair is not an MLA pool here.',
    ],
  },
  KV095: {
    title: 'An fp8 MLA pool needs its scale',
    message: '{arg} is missing: {other} is {actual}, whose stored values are x / scale, so the scale is required',
    fixes: [
      "Pass the cache's scale as an f32 `[1]` tensor: `scale: backend.tensor('f32', [1], [kvCacheScale])` (vLLM's `k_scale` of the MLA attention layer).",
      'Without a calibrated scale, start from 1 and check the pool for saturation: |x| past 448 for fp8e4m3, 57344 for fp8e5m2.',
      'Keep the pool in the model dtype (bf16) to store the rows as they are, with no scale.',
    ],
  },
  KV096: {
    title: 'qkRopeHeadDim is odd',
    message: '{arg} must be even: RoPE rotates pairs of values; got {actual}',
    fixes: [
      "Take `qkRopeHeadDim` from the config's `qk_rope_head_dim` (64 for DeepSeek-V2, V3 and Kimi K2).",
      'Check that `kvLoraRank` and `qkRopeHeadDim` are not swapped: the latent is `kv_lora_rank` (512) wide.',
    ],
  },
});

export const mlaPoolFused: ContractFile = {
  errors: mlaPoolFusedErrors,
  ops: [
    {
      name: 'mlaPoolFused',
      summary: "MLA's latent cache write: each token's RMSNorm(c_kv)·w and RoPE(k_pe) as one row of a one-head pool (NHD or HND, model dtype or fp8) at its slot, and the RoPE part of its query heads rotated with the same angles.",
      dims: {
        N: 'tokens',
        C: 'latent values per token (kv_lora_rank)',
        R: 'RoPE values per token and query head (qk_rope_head_dim)',
        Hq: 'query heads',
        Dq: 'values per query head (qk_nope_head_dim + qk_rope_head_dim)',
        S: 'slots of the pool',
        numPages: 'pages of an HND pool',
        pageSize: 'rows per page',
      },
      errors: mlaPoolFusedErrors,
      steps: [
        int('kvLoraRank', { binds: 'C', code: 'KV006', doc: "Latent values per token (C), the config's kv_lora_rank: RMS-normed." }),
        int('qkRopeHeadDim', { binds: 'R', code: 'KV006', even: { atMost: 'C+R', code: 'KV096' }, doc: "RoPE values per token (R), the config's qk_rope_head_dim: the end of each latent row and of each query head." }),
        int('numQoHeads', { binds: 'Hq', code: 'KV006', optional: true, doc: "Query heads (Hq); checked against q's shape where given." }),
        choice('ropeStyle', {
          options: ['neox', 'gptj'],
          default: 'gptj',
          code: 'KV009',
          doc: "How RoPE values pair: 'gptj' (the default, DeepSeek's interleaved pairs 2j and 2j+1, stored in that order as vLLM and SGLang store them) or 'neox' (j and j+R/2).",
        }),
        number('ropeBase', { above: 0, code: 'KV008', doc: "RoPE base (rope_theta): f_j = ropeBase^(-2j/R)." }),
        ...ropeScalingSteps(),
        tensor('kvLatent', { dtype: FLOAT, shape: ['N', 'C+R'], rankCode: 'KV090', code: 'KV090', doc: "Per token [c_kv, k_pe], kv_a_proj_with_mqa's output (a view of a wider projection is read in place)." }),
        tensor('kvNormWeight', { dtype: sameAs('kvLatent', 'f32'), shape: ['C'], code: 'KV091', doc: "kv_a_layernorm.weight; kvLatent's dtype or f32." }),
        number('eps', { min: 0, code: 'KV008', doc: "RMSNorm epsilon of kv_a_layernorm (rms_norm_eps)." }),
        tensor('q', {
          dtype: sameAs('kvLatent'),
          shape: ['N', 'Hq', 'Dq'],
          rankCode: 'KV092',
          code: 'KV092',
          optional: true,
          dimAtLeast: { dim: 'Dq', min: 'R', code: 'KV093' },
          doc: 'Queries [N, Hq, qk_nope_head_dim + R] (or the absorbed [N, Hq, C + R]): the last R values of each head are rotated, the others copied.',
        }),
        tensor('positions', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Position of each token.' }),
        tensor('slots', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Pool slot of each token; negative means skip. Tokens naming one slot: the last of them writes it, the others nothing.' }),
        choice('layout', {
          options: ['NHD', 'HND'],
          default: 'NHD',
          code: 'KV009',
          doc: "Pool layout: 'NHD' is [S, 1, C + R]; 'HND' is [numPages, 1, pageSize, C + R] (slot s at page s / pageSize, row s % pageSize). With one head both put slot s at row s.",
        }),
        tensor('pool', {
          dtype: sameAs('kvLatent', ...FP8),
          shape: ['S', '1', 'C+R'],
          rankCode: 'KV094',
          code: 'KV094',
          byChoice: { choice: 'layout', options: { HND: { shape: ['numPages', '1', 'pageSize', 'C+R'], code: 'KV094', rankCode: 'KV094', binds: { S: 'numPages*pageSize' } } } },
          doc: "The layer's latent cache, written in place: kvLatent's dtype, or fp8 with scale.",
        }),
        tensor('scale', { dtype: F32, shape: ['1'], code: 'KV072', optional: true, doc: 'Scale of an fp8 pool (stored = x / scale): [1], f32.' }),
        givenForDtype(['scale'], { tensor: 'pool', dtypes: FP8, missingCode: 'KV095', refusedCode: 'KV071' }),
        values('scale', scaleValues),
        // A pool that is also an input would be read while it is written.
        ...(['kvLatent', 'q', 'kvNormWeight'] as const).map((input) => distinct(['pool', input], 'KV039')),
        contiguous(['pool'], 'KV048'),
        values('slots', { below: 'S', negativeSkips: true, duplicates: 'last', code: 'KV038' }),
      ],
      outputs: [{ name: 'qRot', dtypeOf: 'q', shape: ['N', 'Hq', 'Dq'], given: 'q', doc: 'q with the last R values of each head rotated, the others copied; returned where q is given.' }],
    },
  ],
};
