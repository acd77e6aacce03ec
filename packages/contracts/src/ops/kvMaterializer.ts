import { callback, distinct, errors, exactlyOne, F32, FLOAT, INDEX, int, number, sameAs, stateful, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { ropeParams } from './fusedNormRopeStacked.js';

export const kvMaterializerErrors = errors({
  KV020: { title: 'kvWeight is not [L, 2*H*D, hidden]', message: '{arg} has shape {actual}; expected {expected}' },
  KV021: { title: 'Give exactly one of cosSinCache and ropeBase', message: 'pass exactly one of cosSinCache and ropeBase; got {actual}' },
  KV022: { title: 'ctxHidden is not [T, hidden]', message: '{arg} has shape {actual}; expected {expected}' },
  KV023: { title: 'positions count differs from the ctxHidden token count', message: '{arg} holds {count} entries; expected {expected}, one per token of ctxHidden' },
  KV024: { title: 'KV pool is not [L, S, H, D]', message: '{arg} has shape {actual}; expected {expected}' },
  KV025: { title: 'slots is not [T]', message: '{arg} has shape {actual}; expected {expected}, one slot per token of ctxHidden' },
  KV026: { title: 'positions is not a list of T entries', message: '{arg} must be [T], [T, 1] or [1, T]; got shape {actual}' },
  KV027: { title: 'Layer view used after writeLayerKv returned', message: '{arg} is a view of layer {layer} that was valid only during writeLayerKv; copy it inside the callback' },
});

const dims = { T: 'tokens', L: 'layers', H: 'KV heads', D: 'head dim', R: 'rotary dim', P: 'rows of the cos/sin cache', S: 'slots of a KV pool', hidden: 'model width' };

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
          int('maxPositionHint', { code: 'KV006', optional: true, doc: 'Largest position expected; sizes the cache up front so no call reads positions on the host.' }),
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
            tensor('positions', { dtype: INDEX, shape: ['T'], flattenable: true, rankCode: 'KV026', code: 'KV023', doc: 'Position of each token; [T, 1] and [1, T] are flattened.' }),
            callback('writeLayerKv', { code: 'KV044', dtypeOf: 'kvWeight', signature: '(layer: number, k: Tensor<DT, readonly [T, H, D]>, v: Tensor<DT, readonly [T, H, D]>) => void', doc: 'Called once per layer with K and V views [T, H, D], valid only during the call.' }),
            values('positions', { min: 0, below: 'P', code: 'KV017' }),
          ],
          outputs: [],
        },
        {
          name: 'materializeInto',
          summary: 'Like materialize, but writes K and V of every layer straight into [L, S, H, D] pools at the given slots.',
          errors: kvMaterializerErrors,
          steps: [
            tensor('ctxHidden', { dtype: sameAs('kvWeight'), shape: ['T', 'hidden'], code: 'KV022', doc: 'Hidden states of the context tokens.' }),
            tensor('positions', { dtype: INDEX, shape: ['T'], flattenable: true, rankCode: 'KV026', code: 'KV023', doc: 'Position of each token; [T, 1] and [1, T] are flattened.' }),
            tensor('kPool', { dtype: sameAs('kvWeight'), shape: ['L', 'S', 'H', 'D'], code: 'KV024', doc: 'K pool of every layer, written in place.' }),
            tensor('vPool', { dtype: sameAs('kvWeight'), shape: ['L', 'S', 'H', 'D'], code: 'KV024', doc: 'V pool of every layer, written in place.' }),
            distinct(['kPool', 'vPool'], 'KV039'),
            tensor('slots', { dtype: INDEX, shape: ['T'], code: 'KV025', doc: 'Pool slot of each token; negative means skip.' }),
            values('positions', { min: 0, below: 'P', code: 'KV017' }),
            values('slots', { below: 'S', negativeSkips: true, code: 'KV038' }),
          ],
          outputs: [],
        },
      ],
    }),
  ],
};
