import { distinct, errors, FLOAT, INDEX, int, number, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { ropeParams } from './fusedNormRopeStacked.js';

export const ropePoolFusedErrors = errors({
  KV030: { title: 'q, k or v is not 3-D', message: '{arg} must be {rank}-D {expected}; got shape {actual}' },
  KV031: { title: 'q is not [N, numQoHeads, headDim]', message: '{arg} has shape {actual}; expected {expected}' },
  KV032: { title: 'k or v is not [N, numKvHeads, headDim]', message: '{arg} has shape {actual}; expected {expected}' },
  KV033: { title: 'positions or slots is not 1-D', message: '{arg} must be {rank}-D {expected}; got shape {actual}' },
  KV034: { title: 'positions or slots count differs from the token count', message: '{arg} has shape {actual}; expected {expected}, one entry per token of q' },
  KV035: { title: 'KV pool is not 3-D', message: '{arg} must be {rank}-D {expected}; got shape {actual}' },
  KV036: { title: 'KV pool is not [S, numKvHeads, headDim]', message: '{arg} has shape {actual}; expected {expected}' },
  KV037: { title: 'numQoHeads is not a multiple of numKvHeads', message: '{arg} = {actual} is not a multiple of numKvHeads = {expected}' },
  KV038: { title: 'Slot outside the KV pool', message: '{arg}[{index}] = {actual} is outside the pool slots [0, {expected}); use a negative slot to skip a token' },
  KV039: { title: 'A KV pool is the same tensor as another argument', message: '{arg} and {other} are the same tensor; a pool written in place must be a tensor of its own' },
});

const [numKvHeads, headDim, rotaryDim, ropeStyle] = ropeParams(true);

export const ropePoolFused: ContractFile = {
  errors: ropePoolFusedErrors,
  ops: [
    {
      name: 'ropePoolFused',
      summary: 'RoPE on Q and K from ropeBase, and K and V scattered into a KV pool at the given slots.',
      dims: { N: 'tokens', Hq: 'query heads', H: 'KV heads', D: 'head dim', R: 'rotary dim', S: 'slots of the KV pool' },
      errors: ropePoolFusedErrors,
      steps: [
        numKvHeads!,
        int('numQoHeads', { binds: 'Hq', code: 'KV006', multipleOf: { of: 'H', code: 'KV037' }, doc: 'Query heads (Hq), a multiple of numKvHeads.' }),
        headDim!,
        rotaryDim!,
        ropeStyle!,
        number('ropeBase', { above: 0, code: 'KV008', doc: 'RoPE base (theta): f_j = ropeBase^(-2j/R).' }),
        tensor('q', { dtype: FLOAT, shape: ['N', 'Hq', 'D'], rankCode: 'KV030', code: 'KV031', doc: 'Queries.' }),
        tensor('k', { dtype: sameAs('q'), shape: ['N', 'H', 'D'], rankCode: 'KV030', code: 'KV032', doc: 'Keys.' }),
        tensor('v', { dtype: sameAs('q'), shape: ['N', 'H', 'D'], rankCode: 'KV030', code: 'KV032', doc: 'Values.' }),
        tensor('positions', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Position of each token.' }),
        tensor('slots', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Pool slot of each token; negative means skip. Tokens naming one slot: the last of them writes it (its K and V rows, every head), the others nothing.' }),
        tensor('kPool', { dtype: sameAs('q'), shape: ['S', 'H', 'D'], rankCode: 'KV035', code: 'KV036', doc: 'K pool, written in place.' }),
        tensor('vPool', { dtype: sameAs('q'), shape: ['S', 'H', 'D'], rankCode: 'KV035', code: 'KV036', doc: 'V pool, written in place.' }),
        distinct(['kPool', 'vPool'], 'KV039'),
        // A pool that is also an input would be read while it is written (possible when N == S).
        ...(['q', 'k', 'v'] as const).flatMap((input) => [distinct(['kPool', input], 'KV039'), distinct(['vPool', input], 'KV039')]),
        values('slots', { below: 'S', negativeSkips: true, duplicates: 'last', code: 'KV038' }),
      ],
      outputs: [
        { name: 'qRot', dtypeOf: 'q', shape: ['N', 'Hq', 'D'], doc: 'Q after RoPE.' },
        { name: 'kRot', dtypeOf: 'q', shape: ['N', 'H', 'D'], doc: 'K after RoPE (also written to kPool).' },
      ],
    },
  ],
};
