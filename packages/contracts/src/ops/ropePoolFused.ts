import { contiguous, distinct, errors, FLOAT, INDEX, int, number, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { ropeParams } from './fusedNormRopeStacked.js';
import { layoutChoice, poolSteps } from './kvPools.js';
import { mropeErrors, mropePositions, mropeSteps } from './mrope.js';
import { qkNormErrors, qkNormSteps } from './qkNorm.js';
import { ropeScalingSteps } from './ropeScaling.js';

export const ropePoolFusedErrors = errors({
  KV030: {
    title: 'q, k or v is not 3-D',
    message: '{arg} must be {rank}-D {expected}; got shape {actual}',
    fixes: [
      'Give each tensor its head axis: upload or create it as `[N, Hq, D]` (for `q`) and `[N, H, D]` (for `k`, `v`); the data order of a row-major `[N, H*D]` is the same.',
      'Flatten a batch axis into the token axis: `[B*S, H, D]`, with positions and slots flattened alike.',
      'For a single token, keep `N = 1`: `[1, Hq, D]`.',
    ],
  },
  KV031: {
    title: 'q is not [N, numQoHeads, headDim]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Pass the query head count of the tensor you actually hold as `numQoHeads` (per rank under tensor parallelism).',
      'Take `headDim` from the model whose projection produced `q`.',
      'Check `q.shape[1] === numQoHeads && q.shape[2] === headDim` where `q` is produced.',
    ],
  },
  KV032: {
    title: 'k or v is not [N, numKvHeads, headDim]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Store the un-expanded keys and values, `[N, H, D]` with `H = num_key_value_heads`; expand only inside attention.',
      'Slice `q`, `k`, `v`, `positions` and `slots` from the same token range.',
      'Check that `numKvHeads` and `headDim` describe `k` and `v` exactly.',
    ],
  },
  KV033: {
    title: 'positions or slots is not 1-D',
    message: '{arg} must be {rank}-D {expected}; got shape {actual}',
    fixes: [
      'Flatten positions and slots to `[N]` in the same token order as `q`, `k` and `v`.',
      'Compute the per-token slot from the page table: `slot = page * pageSize + offset`, one entry per token.',
      'For a single token, use `[1]` tensors.',
    ],
  },
  KV034: {
    title: 'positions or slots count differs from the token count',
    message: '{arg} has shape {actual}; expected {expected}, one entry per token of q',
    fixes: [
      'Slice `positions` and `slots` with the same token range as `q`, `k` and `v`.',
      'Compute positions per chunk from the context length so far: `start, start + 1, ..., start + N - 1`.',
      'Build slots after the scheduler has fixed the batch, not before.',
    ],
  },
  KV035: {
    title: 'KV pool is not 3-D',
    message: '{arg} must be {rank}-D {expected}; got shape {actual}',
    fixes: [
      "Keep one `[S, H, D]` pool per layer for `ropePoolFused`, and pass the current layer's.",
      'Flatten a paged cache to `[num_pages * page_size, H, D]` and use `page * pageSize + offset` as the slot.',
      'To write every layer at once from hidden states, use `m.materializeInto`, which takes `[L, S, H, D]` pools.',
    ],
  },
  KV036: {
    title: 'KV pool is not [S, numKvHeads, headDim]',
    message: '{arg} has shape {actual}; expected {expected}',
    fixes: [
      'Allocate both pools as `backend.empty(dtype, [S, numKvHeads, headDim])`.',
      'Grow `kPool` and `vPool` together so they always have the same `S`.',
      'If your attention kernel needs another layout, keep a separate pool for it; this op writes `[S, H, D]`.',
    ],
  },
  KV037: {
    title: 'numQoHeads is not a multiple of numKvHeads',
    message: '{arg} = {actual} is not a multiple of numKvHeads = {expected}',
    fixes: [
      'Check the model config: `num_attention_heads` goes to `numQoHeads` and `num_key_value_heads` to `numKvHeads`.',
      'Under tensor parallelism, pass the per-rank counts; when `tp` exceeds the KV head count, KV heads are replicated, so each rank still holds a whole group.',
      'Verify `numQoHeads % numKvHeads === 0` when loading the model.',
    ],
  },
  KV038: {
    title: 'Slot outside the KV pool',
    message: '{arg}[{index}] = {actual} is outside the pool slots [0, {expected}); use a negative slot to skip a token',
    fixes: [
      "Make the pool at least as large as the allocator's capacity: `S > max slot`.",
      'Mark tokens that must not be written with `-1`, not with an out-of-range value.',
      "Check the slot formula against the pool's layout (page size, pages per request).",
    ],
  },
  KV039: {
    title: 'A KV pool is the same tensor as another argument',
    message: '{arg} and {other} share storage (the same tensor, or views that overlap); a pool written in place must be storage of its own',
    fixes: [
      'Allocate two pools with the same shape, one for K and one for V.',
      'Check your pool registry: key entries by layer and by role (K or V).',
      'Keep the per-token inputs (`q`, `k`, `v`) in buffers of their own, never inside the pool being written.',
    ],
  },
});

const [numKvHeads, headDim, rotaryDim, ropeStyle] = ropeParams(true);

export const ropePoolFused: ContractFile = {
  errors: { ...ropePoolFusedErrors, ...mropeErrors, ...qkNormErrors },
  ops: [
    {
      name: 'ropePoolFused',
      summary: 'RoPE on Q and K from ropeBase, and K and V scattered into a KV pool (NHD or HND, model dtype or fp8) at the given slots.',
      dims: { N: 'tokens', Hq: 'query heads', H: 'KV heads', D: 'head dim', R: 'rotary dim', S: 'slots of the KV pool', numPages: 'pages of an HND pool', pageSize: 'rows per page' },
      errors: { ...ropePoolFusedErrors, ...mropeErrors, ...qkNormErrors },
      steps: [
        numKvHeads!,
        int('numQoHeads', { binds: 'Hq', code: 'KV006', multipleOf: { of: 'H', code: 'KV037' }, doc: 'Query heads (Hq), a multiple of numKvHeads.' }),
        headDim!,
        rotaryDim!,
        ropeStyle!,
        number('ropeBase', { above: 0, code: 'KV008', doc: 'RoPE base (theta): f_j = ropeBase^(-2j/R).' }),
        ...ropeScalingSteps(),
        ...mropeSteps,
        tensor('q', { dtype: FLOAT, shape: ['N', 'Hq', 'D'], rankCode: 'KV030', code: 'KV031', doc: 'Queries.' }),
        tensor('k', { dtype: sameAs('q'), shape: ['N', 'H', 'D'], rankCode: 'KV030', code: 'KV032', doc: 'Keys.' }),
        tensor('v', { dtype: sameAs('q'), shape: ['N', 'H', 'D'], rankCode: 'KV030', code: 'KV032', doc: 'Values.' }),
        ...qkNormSteps(),
        mropePositions(tensor('positions', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Position of each token.' })),
        tensor('slots', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Pool slot of each token; negative means skip. Tokens naming one slot: the last of them writes it (its K and V rows, every head), the others nothing.' }),
        layoutChoice,
        ...poolSteps({ modelDtype: 'q', leading: [], nhd: { rankCode: 'KV035', code: 'KV036' }, doc: '' }),
        distinct(['kPool', 'vPool'], 'KV039'),
        contiguous(['kPool', 'vPool'], 'KV048'),
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
