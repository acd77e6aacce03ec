import { callback, contiguous, distinct, errors, exactlyOne, F32, FLOAT, INDEX, int, number, sameAs, stateful, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { epsValues, ropeParams } from './fusedNormRopeStacked.js';
import { layoutChoice, poolSteps } from './kvPools.js';
import { mropePositions, mropeSteps } from './mrope.js';
import { ropeScalingSteps } from './ropeScaling.js';

export const kvMaterializerErrors = errors({
  KV020: {
    title: 'kvWeight is not [L, 2*H*D, hidden]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      "Take rows `[qSize, qSize + 2*H*D)` of each layer's QKV weight (`[out, in]`) and stack them into `[L, 2*H*D, hidden]`.",
      'If your weights are `[in, out]`, transpose each layer to `[out, in]` before stacking.',
      "Pass the KV head count as `numKvHeads` and the draft model's `headDim`.",
      'Use the fused path only when all layers share the same KV head count and head dim; otherwise materialize those layers separately.',
    ],
  },
  KV021: {
    title: 'Give exactly one of cosSinCache and ropeBase',
    message: 'pass exactly one of cosSinCache and ropeBase; got {actual}',
    fixes: [
      "For plain RoPE, pass only `ropeBase` (the model's `rope_theta`) and optionally `maxPositionHint`.",
      'For scaled RoPE (YaRN, dynamic NTK, Llama 3, linear), pass `ropeBase` with `ropeScaling`; for a cache shared with the target model, pass only `cosSinCache`, built with `rotaryDim` columns (`ropeCosSinCache` builds one).',
      'Remove the other argument, rather than setting it to a dummy value.',
    ],
  },
  KV022: {
    title: 'ctxHidden is not [T, hidden]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      "Project the target's hidden states to the draft's width first (the draft model's `fc` layer), then materialize.",
      'Flatten a batch axis into the token axis: `[B*T, hidden]`, with positions flattened the same way.',
      'Check that the materializer was built with the `kvWeight` of the model whose hidden states you pass.',
    ],
  },
  KV023: {
    title: 'positions count differs from the ctxHidden token count',
    message: '{arg} holds {count} entries; expected {expected}, one per token of ctxHidden',
    fixes: [
      'Build `positions` from the same token list as `ctxHidden`, right before the call: `positions.length === ctxHidden.shape[0]`.',
      'After any append, truncation or rollback, recompute both together rather than patching one.',
      'Remove padding from positions when it is removed from the hidden states.',
    ],
  },
  KV024: {
    title: 'KV pool is not [L, S, H, D]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      "Allocate each pool as `backend.empty(dtype, [L, S, H, D])` with the draft model's `L`, `H` (KV heads) and `D`.",
      'Use the same `S` for K and V.',
      'If your cache keeps one pool per layer, call `ropePoolFused` per layer, or reorganise it into one `[L, S, H, D]` pool.',
    ],
  },
  KV025: {
    title: 'slots is not [T]',
    message: '{arg} has shape {actual}; expected {expected}, one slot per token of ctxHidden',
    fixes: [
      'Build `slots` from the same token list as `ctxHidden` and `positions`: one entry per token.',
      'For tokens that must not be written (already cached, padding), keep them in the list and give them slot `-1`.',
      'Flatten `[B, S]` slot tables to `[B*S]` together with the hidden states.',
    ],
  },
  KV026: {
    title: 'positions is not a list of T entries',
    message: '{arg} must be [T], [T, 1] or [1, T]; got shape {actual}',
    fixes: [
      'Flatten the positions in the same order as the rows of `ctxHidden` and upload them as `[T]`.',
      'For a single token, use a `[1]` tensor, not a 0-D one.',
      'If you have padding in a `[B, S]` table, drop it from both the positions and the hidden states before flattening.',
    ],
  },
  KV027: {
    title: 'Layer view used after writeLayerKv returned',
    message: '{arg} is a view of layer {layer} that was valid only during writeLayerKv; copy it inside the callback',
    fixes: [
      'Do the work inside the callback: start `backend.read(k)`, or write the views into your own pool with an op, before returning.',
      'Collect the promises, not the views: `reads.push(backend.read(k))`, then `await Promise.all(reads)` after `materialize`.',
      'Use `m.materializeInto({ ... kPool, vPool, slots })` to write all layers straight into `[L, S, H, D]` pools with no views at all.',
    ],
  },
  KV028: {
    title: 'Position at or past 2^31',
    message: '{arg}[{index}] = {actual} is at or past {expected}, the bound on positions; a position counts tokens of one sequence',
    fixes: [
      'Pass the position of each token within its own sequence: `0` for the first token, counting up.',
      'Unpack ids kept in the high bits before building the `positions` tensor, and pass the sequence\'s own positions only.',
      "Build `positions` from the values your model's rotary embedding receives in the reference implementation; they are small integers.",
    ],
  },
});

/**
 * Positions a materializer accepts are below 2^31, cache or not: real
 * contexts stay far below it, so a larger i64 position is a bug upstream,
 * and an f32 angle at such a position has no significant digit left.
 */
export const MAX_POSITION_BELOW = 2 ** 31;

const positionValues = values('positions', { min: 0, below: 'P', ceiling: { below: MAX_POSITION_BELOW, code: 'KV028' }, code: 'KV017' });

/** One position per token, or with mropeSection mRoPE's [3, T] streams, each stream read as one-stream positions are. */
const materializerPositions = mropePositions(
  tensor('positions', { dtype: INDEX, shape: ['T'], flattenable: true, rankCode: 'KV026', code: 'KV023', doc: 'Position of each token, in [0, 2^31) and below P with a cache; [T, 1] and [1, T] are flattened.' }),
);

const dims = { T: 'tokens', L: 'layers', H: 'KV heads', D: 'head dim', R: 'rotary dim', P: 'rows of the cos/sin cache', S: 'slots of a KV pool', hidden: 'model width', numPages: 'pages of an HND pool', pageSize: 'rows per page' };

export const kvMaterializer: ContractFile = {
  errors: kvMaterializerErrors,
  ops: [],
  stateful: [
    stateful({
      name: 'KvMaterializer',
      disposes: 'the weights, caches and workspaces this materializer holds',
      create: {
        name: 'createKvMaterializer',
        summary: "Holds a draft model's K/V projection weights for all layers; each call projects once and applies RMSNorm and RoPE.",
        dims,
        errors: kvMaterializerErrors,
        steps: [
          ...ropeParams(true),
          tensor('kvWeight', { dtype: FLOAT, shape: ['L', '2*H*D', 'hidden'], code: 'KV020', doc: "Each layer's K rows then V rows of its qkv projection, [out, in] as in PyTorch." }),
          tensor('kNormWeight', { dtype: sameAs('kvWeight', 'f32'), shape: ['L', 'D'], code: 'KV012', doc: "RMSNorm weight of K, per layer; kvWeight's dtype or f32." }),
          tensor('eps', { dtype: F32, shape: ['L'], code: 'KV013', orNumber: { min: 0, code: 'KV008' }, doc: 'RMSNorm epsilon: per layer, or one number for all.' }),
          tensor('cosSinCache', { dtype: FLOAT, shape: ['P', 'R'], code: 'KV016', optional: true, doc: 'A ready cos/sin cache; or give ropeBase.' }),
          number('ropeBase', { above: 0, code: 'KV008', optional: true, doc: 'RoPE base (theta); the cache is then built here and grown on demand.' }),
          exactlyOne(['cosSinCache', 'ropeBase'], 'KV021'),
          ...ropeScalingSteps(),
          int('maxPositionHint', { code: 'KV006', optional: true, doc: 'Largest position expected; sizes the cache up front so no call reads positions on the host.' }),
          values('eps', epsValues),
        ],
        outputs: [],
      },
      methods: [
        {
          name: 'materialize',
          summary: 'Projects ctxHidden for every layer in one GEMM, applies RMSNorm and RoPE to K, and hands each layer to writeLayerKv.',
          errors: kvMaterializerErrors,
          steps: [
            tensor('ctxHidden', { dtype: sameAs('kvWeight'), shape: ['T', 'hidden'], code: 'KV022', doc: 'Hidden states of the context tokens.' }),
            ...mropeSteps,
            materializerPositions,
            callback('writeLayerKv', { code: 'KV044', dtypeOf: 'kvWeight', signature: '(layer: number, k: Tensor<DT, readonly [T, H, D]>, v: Tensor<DT, readonly [T, H, D]>) => NotThenable', doc: 'Called once per layer with K and V views [T, H, D], valid only during the call; synchronous (a returned promise is refused with KV044).' }),
            positionValues,
          ],
          outputs: [],
        },
        {
          name: 'materializeInto',
          summary: 'Like materialize, but writes K and V of every layer straight into pools at the given slots: [L, S, H, D] (NHD) or [L, numPages, H, pageSize, D] (HND), model dtype or fp8.',
          errors: kvMaterializerErrors,
          steps: [
            tensor('ctxHidden', { dtype: sameAs('kvWeight'), shape: ['T', 'hidden'], code: 'KV022', doc: 'Hidden states of the context tokens.' }),
            ...mropeSteps,
            materializerPositions,
            layoutChoice,
            ...poolSteps({ modelDtype: 'kvWeight', leading: ['L'], nhd: { code: 'KV024' }, doc: ' of every layer' }),
            distinct(['kPool', 'vPool'], 'KV039'),
            contiguous(['kPool', 'vPool'], 'KV048'),
            tensor('slots', { dtype: INDEX, shape: ['T'], code: 'KV025', doc: 'Pool slot of each token; negative means skip. Tokens naming one slot: the last of them writes it (its K and V rows, every head), the others nothing.' }),
            positionValues,
            values('slots', { below: 'S', negativeSkips: true, duplicates: 'last', code: 'KV038' }),
          ],
          outputs: [],
        },
      ],
    }),
  ],
};
