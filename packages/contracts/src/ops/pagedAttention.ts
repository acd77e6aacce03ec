import { contiguous, distinct, errors, flag, FLOAT, INDEX, int, number, offsets, sameAs, segmentsWithin, tensor, values } from '../dsl/declare.js';
import type { ContractFile } from '../dsl/declare.js';
import { layoutChoice, poolSteps } from './kvPools.js';

/** The largest head dim the attention kernels hold a query row and its accumulator for: MLA's latent row, 512 + 64. */
export const ATTENTION_MAX_HEAD_DIM = 576;

/**
 * Attention of new tokens' queries over the K/V rows a KV pool holds for
 * each request (decode, speculative verification, prefill chunks), reading
 * the pools ropePoolFused writes: either layout, model dtype or fp8 with
 * scales. A request is a run of queries (qIndptr) and a run of cached slots
 * (kvIndptr into kvSlots, in position order); its queries are its last
 * qLen tokens, so query i sits at position kvLen - qLen + i.
 */
export const pagedAttentionErrors = errors({
  KV076: {
    title: 'headDim is larger than the attention kernels take',
    message: '{arg} = {actual} is above {expected}, the largest head dim pagedAttention runs',
    fixes: [
      'Check that `headDim` is the per-head size (`head_dim` of the config), not the hidden size or `numQoHeads * headDim`.',
      'For multi-head latent attention, the head dim is the latent row, `kv_lora_rank + qk_rope_head_dim` (576), with `vHeadDim: kv_lora_rank`; wider heads need an attention kernel of their own.',
      'Split a head dim that is a concatenation (a RoPE part and a no-RoPE part) only if the model computes their logits as one dot product; otherwise keep them whole.',
    ],
  },
  KV077: {
    title: 'qIndptr or kvIndptr is not [B + 1]',
    message: '{arg} has shape {actual}; expected {expected}: qIndptr and kvIndptr hold B + 1 offsets each, one more than the requests',
    fixes: [
      'Build both offsets arrays from the same list of requests: `qIndptr = [0, q0, q0 + q1, ...]` and `kvIndptr = [0, kv0, kv0 + kv1, ...]`, each with B + 1 entries.',
      'Keep them 1-D `[B + 1]` i32 or i64 tensors, not `[B, 2]` pairs or `[B]` lengths.',
      'When a request drops out of a batch, remove its entry from both arrays, not from one.',
    ],
  },
  KV078: {
    title: 'Offsets do not run from 0 to the row count',
    message: '{arg}[{index}] = {actual}: {problem}',
    fixes: [
      'Make entry 0 of each indptr 0 and each next entry the previous one plus that request\'s length: a prefix sum of the lengths.',
      'End `qIndptr` at the token count of `q` (N) and `kvIndptr` at the length of `kvSlots`; slice q and kvSlots to the batch the offsets describe.',
      'Give each request its own run: offsets are positions in `q` and `kvSlots`, not in the pool (slots go in `kvSlots`).',
    ],
  },
  KV079: {
    title: 'A request has more queries than cached tokens',
    message: 'request {index} has {actual} queries in {arg} but {expected} cached tokens in {other}: its new tokens are among its cached ones, so qLen <= kvLen',
    fixes: [
      'Write the new tokens\' K and V into the pool first (ropePoolFused with their slots) and count them in kvIndptr and kvSlots: a request sees its own new tokens.',
      'Check that both indptr arrays list the requests in the same order.',
      'A request with no cached tokens yet has no queries either: leave it out of the call, or give it qLen = kvLen = 0.',
    ],
  },
  KV080: {
    title: 'A cached token\'s slot is outside the pool',
    message: '{arg}[{index}] = {actual} is outside the pool slots [0, {expected}); every cached token names a slot that holds its K and V rows',
    fixes: [
      'Check the slot formula against the pool: `slot = page * pageSize + offset`, below `S` (`numPages * pageSize` for HND).',
      'Do not pad `kvSlots` with -1 or a sentinel: shorten the request in `kvIndptr` instead, since a padded entry would be attended to.',
      'Use the pools the slots were written to (the same layer, the same cache).',
    ],
  },
  KV081: {
    title: 'out is not [N, numQoHeads, headDim]',
    message: '{arg} has shape {actual}; expected {expected}, one row per query and query head',
    fixes: [
      "Allocate the output like q: `backend.empty(q.dtype, [N, numQoHeads, headDim])`, or `[N, numQoHeads, vHeadDim]` where vHeadDim is given (MLA: kv_lora_rank).",
      'Leave `out` out to get a new tensor each call.',
      'For a `[N, numQoHeads * headDim]` buffer, pass a `[N, numQoHeads, headDim]` view of it (`backend.view`).',
    ],
  },
  KV097: {
    title: 'vHeadDim is above headDim',
    message: '{arg} = {actual} is above headDim = {expected}: V is the first vHeadDim values of each row of vPool',
    fixes: [
      'For multi-head latent attention, pass the latent pool as both `kPool` and `vPool`, `headDim: kv_lora_rank + qk_rope_head_dim` (576) and `vHeadDim: kv_lora_rank` (512).',
      'Leave `vHeadDim` out where V rows are as wide as K rows: it defaults to headDim.',
      'Check that `headDim` and `vHeadDim` are not swapped.',
    ],
  },
  KV098: {
    title: 'This backend does not run that form of the op yet',
    message: '{backend} does not run {arg} = {actual} yet: {reason}',
    // Every backend runs every form of pagedAttention the contract allows; the code stays so that old messages still resolve.
    retired: true,
    fixes: [
      'Nothing to change: every backend runs every form of pagedAttention, MLA latent pools (`headDim: 576, vHeadDim: 512`) included.',
      'Where an older kvkit still raises it, upgrade @kvkit/kernels-cuda.',
      'Check `backend.label` where the backend is chosen if a form seems refused: no backend refuses a form the contract allows.',
    ],
  },
  KV082: {
    title: 'out shares storage with an input',
    message: '{arg} and {other} share storage (the same tensor, or views that overlap); the attention output needs storage of its own',
    fixes: [
      'Allocate `out` apart from `q` and the pools: `backend.empty(q.dtype, q.shape)`.',
      'To reuse a buffer across layers, keep one output tensor for all of them, never the query tensor of the same call.',
      'Check your buffer registry: key entries by role (queries, output, pools).',
    ],
  },
});

export const pagedAttention: ContractFile = {
  errors: pagedAttentionErrors,
  ops: [
    {
      name: 'pagedAttention',
      summary: "Attention of each request's new queries over its cached K/V rows in a KV pool (NHD or HND, model dtype or fp8), causal by default, with GQA, a sliding window and a logit soft-cap; returns the output and the log-sum-exp.",
      dims: {
        N: 'query tokens of all requests',
        Hq: 'query heads',
        H: 'KV heads',
        D: 'head dim',
        Dv: 'value head dim: the first Dv values of each V row (MLA: kv_lora_rank)',
        S: 'slots of the KV pool',
        numPages: 'pages of an HND pool',
        pageSize: 'rows per page',
        B1: 'entries of each indptr: requests + 1',
        C: 'cached tokens of all requests (kvSlots)',
      },
      errors: pagedAttentionErrors,
      optionalKernel: true,
      steps: [
        int('numKvHeads', { binds: 'H', code: 'KV006', doc: 'KV heads (H) of the pools.' }),
        int('numQoHeads', { binds: 'Hq', code: 'KV006', multipleOf: { of: 'H', code: 'KV037' }, doc: 'Query heads (Hq), a multiple of numKvHeads: query head h reads KV head h / (Hq / H).' }),
        int('headDim', { binds: 'D', code: 'KV006', atMost: { limit: ATTENTION_MAX_HEAD_DIM, code: 'KV076' }, doc: 'Head dim (D) of q and of the pools, at most 576.' }),
        int('vHeadDim', {
          binds: 'Dv',
          code: 'KV006',
          optional: true,
          default: 'D',
          atMostDim: { of: 'D', code: 'KV097' },
          doc: "Values of each V row that attention reads: its first vHeadDim, headDim when omitted. MLA: the latent pool as kPool and vPool, headDim C + R, vHeadDim C.",
        }),
        tensor('q', { dtype: FLOAT, shape: ['N', 'Hq', 'D'], rankCode: 'KV030', code: 'KV031', doc: "Queries of the new tokens (after RoPE), request after request as qIndptr splits them; out takes q's dtype." }),
        layoutChoice,
        ...poolSteps({ modelDtype: 'q', leading: [], nhd: { rankCode: 'KV035', code: 'KV036' }, doc: '', reads: true }),
        tensor('qIndptr', { dtype: INDEX, shape: ['B1'], rankCode: 'KV077', code: 'KV077', doc: "Request b's queries are q[qIndptr[b] .. qIndptr[b + 1]); 0 first, never decreasing, N last." }),
        tensor('kvIndptr', { dtype: INDEX, shape: ['B1'], rankCode: 'KV077', code: 'KV077', doc: "Request b's cached tokens are kvSlots[kvIndptr[b] .. kvIndptr[b + 1]), in position order; 0 first, never decreasing, C last." }),
        tensor('kvSlots', { dtype: INDEX, shape: ['C'], rankCode: 'KV033', code: 'KV033', doc: "The pool slot of each cached token (the request's new tokens included), each in [0, S)." }),
        flag('causal', { default: true, code: 'KV044', doc: 'Query i of a request with qLen queries and kvLen cached tokens sees tokens 0 .. kvLen - qLen + i (true, the default), or all kvLen of them (false).' }),
        number('scale', { above: 0, optional: true, code: 'KV008', doc: 'Factor of q·k before the soft-cap and the softmax; 1 / sqrt(headDim) when omitted.' }),
        int('slidingWindow', { optional: true, code: 'KV006', doc: 'Query i (at position p = kvLen - qLen + i) sees only tokens after p - slidingWindow: at most its last slidingWindow tokens, itself included.' }),
        number('logitSoftcap', { above: 0, optional: true, code: 'KV008', doc: 'cap · tanh(logit / cap) of each scaled logit before the softmax (Gemma 2); none when omitted.' }),
        tensor('out', { dtype: sameAs('q'), shape: ['N', 'Hq', 'Dv'], code: 'KV081', optional: true, doc: "Where the output goes, written in place; a new tensor of q's dtype when omitted." }),
        ...(['q', 'kPool', 'vPool', 'kScale', 'vScale'] as const).map((input) => distinct(['out', input], 'KV082')),
        contiguous(['out'], 'KV048'),
        offsets('qIndptr', { total: 'N', code: 'KV078' }),
        offsets('kvIndptr', { total: 'C', code: 'KV078' }),
        segmentsWithin('qIndptr', 'kvIndptr', 'KV079'),
        values('kvSlots', { min: 0, below: 'S', code: 'KV080' }),
      ],
      outputs: [
        { name: 'out', dtypeOf: 'q', shape: ['N', 'Hq', 'Dv'], doc: "Σ_j softmax_j · v_j per query and query head, rounded once to q's dtype (the caller's out where given)." },
        { name: 'lse', dtypeOf: 'q', dtype: 'f32', shape: ['N', 'Hq'], doc: 'The natural log of Σ_j exp(logit_j) over the tokens each query sees, the logits scaled and capped: what merges partial attention.' },
      ],
    },
  ],
};
