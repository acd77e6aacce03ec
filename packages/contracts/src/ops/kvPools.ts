import { choice, contiguous, distinct, errors, F32, FLOAT, FP8, givenForDtype, INDEX, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile, DimExpr, Step } from '../dsl/declare.js';

/**
 * KV pools as serving engines lay them out: the token-major `NHD` pool
 * (`[S, H, D]`, vLLM's `[numBlocks, blockSize, H, D]` flattened) or the
 * head-major paged `HND` pool (`[numPages, H, pageSize, D]`, slot s at page
 * s / pageSize, row s % pageSize), in the model's dtype or in fp8 with
 * scales. Slots stay the one address: a page table (kvIndptr/kvIndices) is
 * the caller's to turn into `slot = page * pageSize + offset`, so every op
 * keeps one value rule on one index tensor, one slot-ownership pass and
 * one device check, and engines that already hold slot mappings (vLLM,
 * SGLang) pass them as they are.
 */
export const kvPoolErrors = errors({
  KV070: {
    title: 'An fp8 pool needs its scales',
    message: '{arg} is missing: {other} is {actual}, whose stored values are x / scale, so kScale and vScale are required',
    fixes: [
      'Pass the per-tensor scales the checkpoint or calibration gives, as f32 tensors: `kScale: backend.tensor(\'f32\', [1], [kScaleValue])`, and `vScale` alike.',
      'For per-head scales, pass `[numKvHeads]` f32 tensors instead of `[1]`.',
      'Without calibrated scales, start from `[1]` tensors holding 1 and check the pool for saturation (|x| past 448 for fp8e4m3, 57344 for fp8e5m2).',
    ],
  },
  KV071: {
    title: 'Scales given for a pool that is not fp8',
    message: '{arg} is given, but {other} is {actual}: only fp8 pools store x / scale, so a scale here would be ignored',
    fixes: [
      'Drop `kScale` and `vScale` when the pools hold the model dtype (f32, f16, bf16): their values are stored as they are.',
      "If the pools were meant to be fp8, allocate them as `backend.empty('fp8e4m3', shape)` (or `'fp8e5m2'`).",
      'Keep the scales with the pools in your cache registry, so both change together.',
    ],
  },
  KV072: {
    title: 'A scale is not [1] or [H]',
    message: '{arg} has shape {actual}; expected {expected}: one scale for the whole pool, or one per KV head',
    fixes: [
      'Give a per-tensor scale as a `[1]` f32 tensor, not a 0-D one or a plain number.',
      'Give per-head scales as `[numKvHeads]` (the KV heads of this rank under tensor parallelism), not `[numQoHeads]`.',
      'Per-token or per-block scales are not taken: fold them into per-head scales, or keep that pool in the model dtype.',
    ],
  },
  KV073: {
    title: 'Pool is not in the HND paged layout',
    message: '{arg} has shape {actual}; expected {expected} for layout HND',
    fixes: [
      "Allocate HND pools as `[numPages, H, pageSize, D]` (with `[L, ...]` in front for `materializeInto`), or pass `layout: 'NHD'` for `[S, H, D]` pools.",
      'Keep K and V pools of one layer the same shape: same page count and page size.',
      "A FlashInfer paged cache `[numPages, 2, H, pageSize, D]` holds K and V together: pass its K half and V half as two pools of their own.",
    ],
  },
  KV074: {
    title: 'rows is not [N, H, D]',
    message: '{arg} has shape {actual}; expected {expected}, one row per slot read',
    fixes: [
      "Allocate the destination as `backend.empty(dtype, [slots.shape[0], H, D])`, with the pool's `H` and `D`.",
      'Read one pool at a time: a layer of an `[L, ...]` pool is a pool of its own.',
      'Use f32 rows when comparing with a reference; the model dtype rounds once more.',
    ],
  },
  KV075: {
    title: 'rows share storage with the pool they read',
    message: '{arg} and {other} share storage (the same tensor, or views that overlap); the decoded rows need a tensor of their own',
    fixes: [
      'Allocate the rows apart from the pool: `backend.empty(dtype, [N, H, D])`.',
      'To turn a whole pool into the model dtype, read every slot into a new tensor and keep the pool as it is.',
      'Check your buffer registry: key entries by role (pool, rows) as well as by layer.',
    ],
  },
});

/** The pool layouts an op accepts: `NHD` (the default, token-major) and `HND` (head-major pages). */
export const layoutChoice = choice('layout', {
  options: ['NHD', 'HND'],
  default: 'NHD',
  code: 'KV009',
  doc: "Pool layout: 'NHD' is [S, H, D] (token-major); 'HND' is [numPages, H, pageSize, D] (head-major pages; slot s at page s / pageSize, row s % pageSize).",
});

/** HND in front of the NHD shape's leading dims (`['L']` for the materializer's every-layer pools). */
export const hndShape = (leading: readonly DimExpr[]): readonly DimExpr[] => [...leading, 'numPages', 'H', 'pageSize', 'D'];

/**
 * The pools, their scales and the rule tying scales to fp8, for an op whose
 * pools take `modelDtype`'s dtype or fp8. `leading` dims come before a
 * pool's own (`L`); `nhd` gives the NHD shape's codes.
 */
/** An fp8 pool stores the code of x / scale: a scale that is 0, negative, NaN or infinite would fill it with NaN, infinities or flipped signs. */
export const scaleValues = { above: 0, finite: true, code: 'KV019' } as const;

export function poolSteps(opts: { modelDtype: string; leading: readonly DimExpr[]; nhd: { code: string; rankCode?: string }; doc: string; reads?: boolean }): Step[] {
  const { leading, nhd } = opts;
  const access = opts.reads ? 'read' : 'written in place';
  const byChoice = { choice: 'layout', options: { HND: { shape: hndShape(leading), code: 'KV073', rankCode: 'KV073', binds: { S: 'numPages*pageSize' } } } };
  const shape = [...leading, 'S', 'H', 'D'];
  const scale = (pool: string) =>
    tensor(`${pool[0]}Scale`, { dtype: F32, shape: ['1'], orShapes: [['H']], code: 'KV072', optional: true, doc: `Scale of ${pool} where it is fp8 (stored = x / scale): [1] per tensor or [H] per head, f32.` });
  return [
    tensor('kPool', { dtype: sameAs(opts.modelDtype, ...FP8), shape, ...nhd, byChoice, doc: `K pool${opts.doc}, ${access}: the model dtype, or fp8 with kScale.` }),
    tensor('vPool', { dtype: sameAs('kPool'), shape, ...nhd, byChoice, doc: `V pool${opts.doc}, ${access}: kPool's dtype and shape.` }),
    scale('kPool'),
    scale('vPool'),
    givenForDtype(['kScale', 'vScale'], { tensor: 'kPool', dtypes: FP8, missingCode: 'KV070', refusedCode: 'KV071' }),
    values('kScale', scaleValues),
    values('vScale', scaleValues),
  ];
}

export const kvPools: ContractFile = {
  errors: kvPoolErrors,
  ops: [
    {
      name: 'dequantizeKv',
      summary: 'Rows of one KV pool at the given slots, decoded (times the scale, for fp8) into rows of a float dtype.',
      dims: { N: 'slots read', H: 'KV heads', D: 'head dim', S: 'slots of the pool', numPages: 'pages of an HND pool', pageSize: 'rows per page' },
      errors: kvPoolErrors,
      steps: [
        layoutChoice,
        tensor('pool', {
          dtype: { oneOf: ['f32', 'f16', 'bf16', ...FP8] },
          shape: ['S', 'H', 'D'],
          rankCode: 'KV035',
          code: 'KV036',
          byChoice: { choice: 'layout', options: { HND: { shape: hndShape([]), code: 'KV073', rankCode: 'KV073', binds: { S: 'numPages*pageSize' } } } },
          doc: 'The pool to read: one layer, in either layout.',
        }),
        tensor('scale', { dtype: F32, shape: ['1'], orShapes: [['H']], code: 'KV072', optional: true, doc: "The pool's scale where it is fp8: [1] or [H], f32." }),
        givenForDtype(['scale'], { tensor: 'pool', dtypes: FP8, missingCode: 'KV070', refusedCode: 'KV071' }),
        values('scale', scaleValues),
        tensor('slots', { dtype: INDEX, shape: ['N'], rankCode: 'KV033', code: 'KV034', doc: 'Slot of each row to read; negative: that row is left as it is.' }),
        tensor('rows', { dtype: FLOAT, shape: ['N', 'H', 'D'], code: 'KV074', doc: 'Where the rows go: value = decode(code) * scale in f32, rounded once to its dtype.' }),
        distinct(['rows', 'pool'], 'KV075'),
        contiguous(['rows'], 'KV048'),
        values('slots', { below: 'S', negativeSkips: true, code: 'KV038' }),
      ],
      outputs: [],
    },
  ],
};
