import { contiguous, distinct, errors, F32, FLOAT, INDEX, int, choice, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile, Step } from '../dsl/declare.js';
import { mropePositions, mropeSteps } from './mrope.js';

export const fusedNormRopeStackedErrors = errors({
  KV010: {
    title: 'kv is not 3-D',
    message: '{arg} must be {rank}-D {expected}; got shape {actual}',
    fixes: [
      'Build `kv` as `[T, L, 2*H*D]`: for each token and layer, the `H*D` K values followed by the `H*D` V values.',
      'If you only have per-layer projections, stack them along dim 1 on the host, or let `createKvMaterializer` do the projection of all layers in one GEMM.',
      'Drop a leading batch axis of size 1 and flatten separate K/V or head axes into the last dim.',
    ],
  },
  KV011: {
    title: "kv's last dim is not 2*H*D",
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Pass the KV head count (`num_key_value_heads`), not the query head count, as `numKvHeads`.',
      "Slice the projection to the K and V rows only: rows `[qSize, qSize + 2*H*D)` of each layer's QKV weight.",
      'Check `kv.shape[2] === 2 * numKvHeads * headDim` where the tensor is built.',
    ],
  },
  KV012: {
    title: 'kNormWeight is not [L, D]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      "Stack each layer's `k_norm.weight` (length `headDim`) into `[L, D]`, in layer order.",
      'If your model normalises the whole K projection (`[H*D]` weights), it does not fit this fused path: normalise before projecting, or use a per-layer implementation.',
      'Check the layer count: `kNormWeight.shape[0]` must equal `kv.shape[1]` (or `kvWeight.shape[0]`).',
    ],
  },
  KV013: {
    title: 'eps is not [L]',
    message: '{arg} has shape {actual}; expected {expected}, one eps per layer',
    fixes: [
      "Build one value per layer: `backend.tensor('f32', [L], Array(L).fill(rmsNormEps))`.",
      'With `createKvMaterializer`, just pass the number: `eps: 1e-6`.',
      'Make sure `L` matches `kv.shape[1]`, the number of layers you are materializing.',
    ],
  },
  KV014: {
    title: 'Output is not [L, T, H, D]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Allocate outputs as `backend.empty(kv.dtype, [L, T, H, D])`, layers first.',
      'Omit `kOut`/`vOut` and use the returned tensors, unless you need to write into an existing buffer.',
      'When reusing buffers across steps, reallocate them whenever `T` changes (or keep one per token count).',
    ],
  },
  KV015: {
    title: 'positions is not [T]',
    message: '{arg} has shape {actual}; expected {expected}, one position per token of kv',
    fixes: [
      "Build positions as a 1-D tensor with one entry per token of `kv`: `backend.tensor('i32', [T], ...)`.",
      'Create positions from the same token list as `kv`, after any truncation or rollback.',
      'If you hold `[1, T]` or `[T, 1]` data, upload it with shape `[T]` (the data is the same), or use the materializer, which accepts those.',
    ],
  },
  KV016: {
    title: 'cosSinCache is not [P, rotaryDim]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Build the cache with exactly `rotaryDim` columns: cos for `j < R/2`, then sin.',
      'With the materializer, pass `ropeBase` instead of a cache and let kvkit build it with the right width.',
      'Concatenate separate cos and sin tables along the last dim into `[P, R]`.',
      'Check `cosSinCache.shape[1] === rotaryDim` where the cache is created.',
    ],
  },
  KV017: {
    title: 'Position outside the cos/sin cache',
    message: '{arg}[{index}] = {actual} is outside the cos/sin cache rows [0, {expected})',
    fixes: [
      'Build the cos/sin cache with enough rows for the longest context you serve (`P > max position`).',
      'With `createKvMaterializer`, pass `ropeBase` instead of a fixed cache so that kvkit grows the cache as positions increase; use `maxPositionHint` to size it up front.',
      'Check how positions are computed after prefix caching, rollback and batching; they must be absolute positions in the sequence.',
      'Never use negative positions for padding; drop padded tokens, or use negative `slots` (not positions) in `materializeInto`.',
    ],
  },
  KV018: {
    title: 'kOut and vOut are the same tensor',
    message: '{arg} and {other} share storage (the same tensor, or views that overlap); pass two distinct outputs',
    fixes: [
      'Allocate two distinct buffers of shape `[L, T, H, D]`, one for K and one for V.',
      'If your buffer cache is keyed by shape, key it by role too (K vs V).',
      'Omit both and use the tensors returned by the op.',
    ],
  },
  KV019: {
    title: 'A float parameter tensor holds a non-finite or out-of-range value',
    message: '{arg}[{index}] = {actual}; every value must be {expected}',
    fixes: [
      'Build eps from the model config\'s `rms_norm_eps` (a small positive number such as `1e-6`), one value per layer.',
      'Look for a NaN or a negative sign where the values were computed or parsed: `Number(undefined)` is NaN, and `-1e-6` is a typo for `1e-6`.',
      'With `createKvMaterializer`, pass one number (`eps: 1e-6`): it is checked on the spot and expanded to every layer.',
      "An fp8 pool's scale (`kScale`, `vScale`, dequantizeKv's `scale`) must be finite and above 0: take it from the checkpoint's `k_scale` / `v_scale` or from calibration, and never initialise one to 0.",
    ],
  },
});

/** eps is added under the square root of the RMSNorm: NaN, ±Inf or a negative eps would turn a whole layer of K into NaN. */
export const epsValues = { min: 0, finite: true, code: 'KV019' } as const;

/** Shared by every op that applies RoPE: head and rotary dims, and the pairing style. */
export const ropeParams = (rotaryDimOptional: boolean): Step[] => [
  int('numKvHeads', { binds: 'H', code: 'KV006', doc: 'KV heads per layer (H).' }),
  int('headDim', { binds: 'D', code: 'KV006', doc: 'Elements per head (D).' }),
  int('rotaryDim', {
    binds: 'R',
    code: 'KV006',
    doc: 'Leading elements of each head that RoPE rotates (R); the rest are left as they are. Defaults to headDim where optional.',
    ...(rotaryDimOptional ? { optional: true, default: 'D' } : {}),
    even: { atMost: 'D', code: 'KV007' },
  }),
  choice('ropeStyle', {
    options: ['neox', 'gptj'],
    default: 'neox',
    code: 'KV009',
    doc: "How elements pair for rotation: 'neox' pairs i with i+R/2, 'gptj' pairs 2j with 2j+1.",
  }),
];

export const fusedNormRopeStacked: ContractFile = {
  errors: fusedNormRopeStackedErrors,
  ops: [
    {
      name: 'fusedNormRopeStacked',
      summary: 'RMSNorm then RoPE on K, V copied through, for every layer and token in one call.',
      dims: { T: 'tokens', L: 'layers', H: 'KV heads', D: 'head dim', R: 'rotary dim', P: 'rows of the cos/sin cache' },
      errors: fusedNormRopeStackedErrors,
      steps: [
        ...ropeParams(false),
        tensor('kv', { dtype: FLOAT, shape: ['T', 'L', '2*H*D'], rankCode: 'KV010', code: 'KV011', doc: 'Per token and layer: all K heads, then all V heads.' }),
        tensor('kNormWeight', { dtype: sameAs('kv', 'f32'), shape: ['L', 'D'], code: 'KV012', doc: "RMSNorm weight of K, per layer; kv's dtype or f32." }),
        tensor('eps', { dtype: F32, shape: ['L'], code: 'KV013', doc: 'RMSNorm epsilon, per layer.' }),
        tensor('cosSinCache', { dtype: FLOAT, shape: ['P', 'R'], code: 'KV016', doc: 'Row p: cos(p*f_j) for j < R/2, then sin(p*f_j).' }),
        ...mropeSteps,
        mropePositions(tensor('positions', { dtype: INDEX, shape: ['T'], code: 'KV015', doc: 'Position of each token: the cache row it reads.' })),
        tensor('kOut', { dtype: sameAs('kv'), shape: ['L', 'T', 'H', 'D'], code: 'KV014', optional: true, doc: 'Where to write K; allocated when omitted.' }),
        tensor('vOut', { dtype: sameAs('kv'), shape: ['L', 'T', 'H', 'D'], code: 'KV014', optional: true, doc: 'Where to write V; allocated when omitted.' }),
        distinct(['kOut', 'vOut'], 'KV018'),
        contiguous(['kOut', 'vOut'], 'KV048'),
        values('positions', { min: 0, below: 'P', code: 'KV017' }),
        values('eps', epsValues),
      ],
      outputs: [
        { name: 'kOut', dtypeOf: 'kv', shape: ['L', 'T', 'H', 'D'], doc: 'K after RMSNorm and RoPE.' },
        { name: 'vOut', dtypeOf: 'kv', shape: ['L', 'T', 'H', 'D'], doc: 'V, copied bit for bit.' },
      ],
    },
  ],
};
