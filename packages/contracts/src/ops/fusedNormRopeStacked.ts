import { distinct, errors, F32, FLOAT, INDEX, int, choice, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile, Step } from '../dsl/declare.js';

export const fusedNormRopeStackedErrors = errors({
  KV010: { title: 'kv is not 3-D', message: '{arg} must be {rank}-D {expected}; got shape {actual}' },
  KV011: { title: "kv's last dim is not 2*H*D", message: '{arg} has shape {actual}; expected {expected}' },
  KV012: { title: 'kNormWeight is not [L, D]', message: '{arg} has shape {actual}; expected {expected}' },
  KV013: { title: 'eps is not [L]', message: '{arg} has shape {actual}; expected {expected}, one eps per layer' },
  KV014: { title: 'Output is not [L, T, H, D]', message: '{arg} has shape {actual}; expected {expected}' },
  KV015: { title: 'positions is not [T]', message: '{arg} has shape {actual}; expected {expected}, one position per token of kv' },
  KV016: { title: 'cosSinCache is not [P, rotaryDim]', message: '{arg} has shape {actual}; expected {expected}' },
  KV017: { title: 'Position outside the cos/sin cache', message: '{arg}[{index}] = {actual} is outside the cos/sin cache rows [0, {expected})' },
  KV018: { title: 'kOut and vOut are the same tensor', message: '{arg} and {other} are the same tensor; pass two distinct outputs' },
});

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
        tensor('positions', { dtype: INDEX, shape: ['T'], code: 'KV015', doc: 'Position of each token: the cache row it reads.' }),
        tensor('kOut', { dtype: sameAs('kv'), shape: ['L', 'T', 'H', 'D'], code: 'KV014', optional: true, doc: 'Where to write K; allocated when omitted.' }),
        tensor('vOut', { dtype: sameAs('kv'), shape: ['L', 'T', 'H', 'D'], code: 'KV014', optional: true, doc: 'Where to write V; allocated when omitted.' }),
        distinct(['kOut', 'vOut'], 'KV018'),
        values('positions', { min: 0, below: 'P', code: 'KV017' }),
      ],
      outputs: [
        { name: 'kOut', dtypeOf: 'kv', shape: ['L', 'T', 'H', 'D'], doc: 'K after RMSNorm and RoPE.' },
        { name: 'vOut', dtypeOf: 'kv', shape: ['L', 'T', 'H', 'D'], doc: 'V, copied bit for bit.' },
      ],
    },
  ],
};
