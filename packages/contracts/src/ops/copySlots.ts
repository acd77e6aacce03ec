import { choice, contiguous, distinct, errors, F32, FP8, givenForDtype, INDEX, sameAs, tensor, values } from '../dsl/declare.js';
import type { ContractFile, DimExpr, Step } from '../dsl/declare.js';
import type { DType } from '../tensor.js';
import { hndShape, scaleValues } from './kvPools.js';

/**
 * Rows of a pair of K/V pools at some slots into the same slots or others of
 * another pair (or of the same pair): prefix sharing, copy-on-write of a
 * shared page, compaction. The arguments name each pool the way
 * ropePoolFused does (`kPool`, `kScale`), with the side of the copy in the
 * middle: `kSrc` / `kSrcScale` / `srcLayout` and `kDst` / `kDstScale` /
 * `dstLayout`, so a call reads as "K from, V from, K to, V to" and each scale
 * sits next to the pool it belongs to.
 */
export const copySlotsErrors = errors({
  KV083: {
    title: 'fromSlots and toSlots differ in length',
    message: '{arg} has shape {actual}; expected {expected}, one destination slot per source slot',
    fixes: [
      'Build the two lists together, one pair per row copied: `fromSlots[i]` is read and `toSlots[i]` written.',
      'To skip a pair, keep it and make either slot negative, rather than dropping it from one list.',
      'For a whole page, list each of its slots: `page * pageSize + offset` for every offset, in both lists.',
    ],
  },
});

const POOL_DTYPES: readonly DType[] = ['f32', 'f16', 'bf16', ...FP8];

/** One side of the copy: its layout, its K and V pools and their scales (fp8), under that side's names and dims. */
function side(opts: { side: 'Src' | 'Dst'; slots: string; pages: string; pageSize: string; access: string }): Step[] {
  const lower = opts.side.toLowerCase();
  const layout = `${lower}Layout`;
  const [k, v] = [`k${opts.side}`, `v${opts.side}`];
  const shape = [opts.slots, 'H', 'D'];
  const byChoice = { choice: layout, options: { HND: { shape: hndShape([]).map((d: DimExpr) => (d === 'numPages' ? opts.pages : d === 'pageSize' ? opts.pageSize : d)), code: 'KV073', rankCode: 'KV073', binds: { [opts.slots]: `${opts.pages}*${opts.pageSize}` } } } };
  const scale = (pool: string) =>
    tensor(`${pool}Scale`, { dtype: F32, shape: ['1'], orShapes: [['H']], code: 'KV072', optional: true, doc: `Scale of ${pool} where it is fp8 (stored = x / scale): [1] per tensor or [H] per head, f32.` });
  return [
    choice(layout, {
      options: ['NHD', 'HND'],
      default: 'NHD',
      code: 'KV009',
      doc: `Layout of ${k} and ${v}: 'NHD' is [S, H, D]; 'HND' is [numPages, H, pageSize, D] (slot s at page s / pageSize, row s % pageSize).`,
    }),
    tensor(k, { dtype: { oneOf: POOL_DTYPES }, shape, rankCode: 'KV035', code: 'KV036', byChoice, doc: `K pool ${opts.access}: f32, f16, bf16, or fp8 with ${k}Scale.` }),
    tensor(v, { dtype: sameAs(k), shape, rankCode: 'KV035', code: 'KV036', byChoice, doc: `V pool ${opts.access}: ${k}'s dtype and shape.` }),
    scale(k),
    scale(v),
    givenForDtype([`${k}Scale`, `${v}Scale`], { tensor: k, dtypes: FP8, missingCode: 'KV070', refusedCode: 'KV071' }),
    values(`${k}Scale`, scaleValues),
    values(`${v}Scale`, scaleValues),
  ];
}

export const copySlots: ContractFile = {
  errors: copySlotsErrors,
  ops: [
    {
      name: 'copySlots',
      summary: "Rows of a K/V pool pair at fromSlots into the rows at toSlots of another pair or the same (any layouts and dtypes, fp8 re-encoded with the destination's scales).",
      dims: {
        M: 'slot pairs copied',
        H: 'KV heads',
        D: 'head dim',
        S: 'slots of the source pools',
        numPages: 'pages of an HND source',
        pageSize: 'rows per page of an HND source',
        dstS: 'slots of the destination pools',
        dstPages: 'pages of an HND destination',
        dstPageSize: 'rows per page of an HND destination',
      },
      errors: copySlotsErrors,
      optionalKernel: true,
      steps: [
        ...side({ side: 'Src', slots: 'S', pages: 'numPages', pageSize: 'pageSize', access: 'read' }),
        ...side({ side: 'Dst', slots: 'dstS', pages: 'dstPages', pageSize: 'dstPageSize', access: 'written in place (it may be the source pool itself: every row is read as it was before the call)' }),
        tensor('fromSlots', { dtype: INDEX, shape: ['M'], rankCode: 'KV033', code: 'KV033', doc: 'The source slot of each pair; negative: the pair is skipped.' }),
        tensor('toSlots', { dtype: INDEX, shape: ['M'], rankCode: 'KV033', code: 'KV083', doc: 'The destination slot of each pair; negative: skipped. Pairs naming one destination: the last of them not skipped (by either slot) writes it (its K and V rows, every head).' }),
        distinct(['kDst', 'vDst'], 'KV039'),
        contiguous(['kDst', 'vDst'], 'KV048'),
        values('fromSlots', { below: 'S', negativeSkips: true, code: 'KV038' }),
        values('toSlots', { below: 'dstS', negativeSkips: true, duplicates: 'last', code: 'KV038' }),
      ],
      outputs: [],
    },
  ],
};
