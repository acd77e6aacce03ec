import type { FloatDType, Fp8DType, IndexDType, PoolDType } from '@kvkit/contracts';
import fc from 'fast-check';
import type { RopeStyle } from '../cases.js';

/**
 * Random valid configurations of every op: dims (odd ones included),
 * dtypes, pairing styles, partial rotary dims, GQA ratios, and index values
 * inside their bounds, with slots that skip (negative), leave holes and
 * repeat. Each carries a data seed; the tensors' values come from it.
 */

export interface FusedConfig {
  readonly dtype: FloatDType;
  readonly T: number;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly P: number;
  readonly ropeStyle: RopeStyle | undefined;
  readonly positions: readonly number[];
  readonly positionDType: IndexDType;
  readonly weightDType: 'same' | 'f32';
  readonly cacheDType: 'same' | 'f32';
  readonly outputs: 'given' | 'allocated';
  readonly dataSeed: number;
}

export interface RopePoolConfig {
  readonly dtype: FloatDType;
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  /** Omitted from the call when undefined (then R = D). */
  readonly R: number | undefined;
  readonly ropeStyle: RopeStyle | undefined;
  readonly ropeBase: number;
  readonly S: number;
  readonly positions: readonly number[];
  readonly slots: readonly number[];
  readonly positionDType: IndexDType;
  readonly slotDType: IndexDType;
  readonly dataSeed: number;
}

export type MaterializerRopeConfig = { readonly kind: 'cosSinCache'; readonly P: number } | { readonly kind: 'ropeBase'; readonly ropeBase: number; readonly maxPositionHint: number | undefined };

export interface MaterializerCall {
  readonly entry: 'materialize' | 'materializeInto';
  readonly T: number;
  readonly positions: readonly number[];
  readonly positionsShape: '[T]' | '[T, 1]' | '[1, T]';
  readonly positionDType: IndexDType;
  /** materializeInto only. */
  readonly S: number;
  readonly slots: readonly number[];
  readonly slotDType: IndexDType;
}

export interface MaterializerConfig {
  readonly dtype: FloatDType;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number | undefined;
  readonly hidden: number;
  readonly ropeStyle: RopeStyle | undefined;
  readonly rope: MaterializerRopeConfig;
  readonly eps: 'number' | 'tensor';
  readonly weightDType: 'same' | 'f32';
  /** Successive calls on one materializer: its workspaces grow and are reused between them. */
  readonly calls: readonly MaterializerCall[];
  readonly dataSeed: number;
}

const dtypes = fc.constantFrom<FloatDType>('f32', 'f16', 'bf16');
const indexDTypes = fc.constantFrom<IndexDType>('i32', 'i64');
const styles = fc.constantFrom<RopeStyle | undefined>('neox', 'gptj', undefined);
const dataSeeds = fc.integer({ min: 0, max: 2 ** 31 - 1 });

/** Mostly small and odd head dims (element-wise and packed-half paths), sometimes a real model's. */
const headDims = fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 2, max: 24 }) }, { weight: 1, arbitrary: fc.constantFrom(64, 80, 96, 128, 256) });

/** A head dim and an even rotary dim in (0, D]: full rotary half the time. */
const headAndRotary = headDims.chain((D) => {
  const most = 2 * Math.floor(D / 2);
  return fc.oneof(fc.constant(most), fc.integer({ min: 1, max: most / 2 }).map((h) => 2 * h)).map((R) => ({ D, R }));
});

/** Token counts: zero sometimes, mostly a handful. */
const tokenCounts = fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 6, arbitrary: fc.integer({ min: 1, max: 9 }) });

function indices(count: number, below: number): fc.Arbitrary<number[]> {
  return fc.array(fc.integer({ min: 0, max: below - 1 }), { minLength: count, maxLength: count });
}

/** Negative slots of every size the index dtype holds: any negative value means skip. */
function negativeSlot(slotDType: IndexDType): fc.Arbitrary<number> {
  const extremes = slotDType === 'i64' ? [-1, -(2 ** 40), -(2 ** 53 - 1)] : [-1, -(2 ** 31)];
  return fc.oneof(fc.constantFrom(...extremes), fc.integer({ min: -1000, max: -1 }));
}

/** Slots of `count` tokens in a pool of S: skips, duplicates (a small pool makes many), and unnamed rows. */
function slotsOf(count: number, S: number, slotDType: IndexDType): fc.Arbitrary<number[]> {
  const slot = fc.oneof({ weight: 1, arbitrary: negativeSlot(slotDType) }, { weight: 4, arbitrary: fc.integer({ min: 0, max: S - 1 }) });
  return fc.array(slot, { minLength: count, maxLength: count });
}

export const fusedConfigs: fc.Arbitrary<FusedConfig> = fc
  .record({
    dtype: dtypes,
    T: tokenCounts,
    L: fc.integer({ min: 1, max: 3 }),
    H: fc.integer({ min: 1, max: 3 }),
    dims: headAndRotary,
    P: fc.integer({ min: 1, max: 40 }),
    ropeStyle: styles,
    positionDType: indexDTypes,
    weightDType: fc.constantFrom<'same' | 'f32'>('same', 'f32'),
    cacheDType: fc.constantFrom<'same' | 'f32'>('f32', 'same'),
    outputs: fc.constantFrom<'given' | 'allocated'>('given', 'allocated'),
    dataSeed: dataSeeds,
  })
  .chain(({ dims, ...c }) => indices(c.T, c.P).map((positions) => ({ ...c, ...dims, positions })));

export const ropePoolConfigs: fc.Arbitrary<RopePoolConfig> = fc
  .record({
    dtype: dtypes,
    N: tokenCounts,
    H: fc.integer({ min: 1, max: 3 }),
    ratio: fc.constantFrom(1, 2, 3, 4, 8),
    dims: headAndRotary,
    omitRotary: fc.boolean(),
    ropeStyle: styles,
    ropeBase: fc.constantFrom(100, 10000, 500000, 1e6),
    maxPosition: fc.constantFrom(3, 64, 1000, 5000),
    extraSlots: fc.integer({ min: -3, max: 4 }),
    positionDType: indexDTypes,
    slotDType: indexDTypes,
    dataSeed: dataSeeds,
  })
  .chain(({ dims, ratio, omitRotary, maxPosition, extraSlots, ...c }) => {
    const S = Math.max(1, c.N + extraSlots);
    return fc.tuple(indices(c.N, maxPosition + 1), slotsOf(c.N, S, c.slotDType)).map(([positions, slots]) => ({
      ...c,
      Hq: c.H * ratio,
      D: dims.D,
      // Omitting rotaryDim means R = D, so only a full rotary dim may be omitted.
      R: omitRotary && dims.R === dims.D ? undefined : dims.R,
      S,
      positions,
      slots,
    }));
  });

const materializerRopes: fc.Arbitrary<MaterializerRopeConfig> = fc.oneof(
  fc.integer({ min: 1, max: 40 }).map((P) => ({ kind: 'cosSinCache' as const, P })),
  fc.record({ kind: fc.constant('ropeBase' as const), ropeBase: fc.constantFrom(10000, 500000), maxPositionHint: fc.option(fc.integer({ min: 1, max: 64 }), { nil: undefined }) }),
);

/** Positions below the cache's rows, or (ropeBase) up to 3000, past any hint, so the cache grows. */
function materializerCall(rope: MaterializerRopeConfig): fc.Arbitrary<MaterializerCall> {
  const below = rope.kind === 'cosSinCache' ? rope.P : 3000;
  return fc
    .record({
      entry: fc.constantFrom<'materialize' | 'materializeInto'>('materialize', 'materializeInto'),
      T: tokenCounts,
      positionsShape: fc.constantFrom<MaterializerCall['positionsShape']>('[T]', '[T, 1]', '[1, T]'),
      positionDType: indexDTypes,
      extraSlots: fc.integer({ min: -3, max: 4 }),
      slotDType: indexDTypes,
    })
    .chain(({ extraSlots, ...c }) => {
      const S = Math.max(1, c.T + extraSlots);
      return fc.tuple(indices(c.T, below), slotsOf(c.T, S, c.slotDType)).map(([positions, slots]) => ({ ...c, S, positions, slots }));
    });
}

export const materializerConfigs: fc.Arbitrary<MaterializerConfig> = fc
  .record({
    dtype: dtypes,
    L: fc.integer({ min: 1, max: 3 }),
    H: fc.integer({ min: 1, max: 3 }),
    dims: headAndRotary,
    omitRotary: fc.boolean(),
    hidden: fc.integer({ min: 1, max: 40 }),
    ropeStyle: styles,
    rope: materializerRopes,
    eps: fc.constantFrom<'number' | 'tensor'>('number', 'tensor'),
    weightDType: fc.constantFrom<'same' | 'f32'>('same', 'f32'),
    dataSeed: dataSeeds,
  })
  .chain(({ dims, omitRotary, ...c }) =>
    fc.array(materializerCall(c.rope), { minLength: 1, maxLength: 3 }).map((calls) => ({ ...c, D: dims.D, R: omitRotary && dims.R === dims.D ? undefined : dims.R, calls })),
  );

/** The largest position a materializer's calls use (for the ropeBase tolerance). */
export function largestPosition(c: MaterializerConfig): number {
  return Math.max(0, ...c.calls.flatMap((call) => call.positions));
}

export type PoolLayout = 'NHD' | 'HND';

export interface AttentionConfig {
  /** q's dtype, and out's. */
  readonly dtype: FloatDType;
  /** The pools' dtype: q's, or fp8 with scales. */
  readonly poolDType: PoolDType;
  /** fp8 scales `[H]` rather than `[1]`. */
  readonly perHeadScales: boolean;
  /** Omitted from the call when undefined (then NHD). */
  readonly layout: PoolLayout | undefined;
  /** Rows per page of an HND pool. */
  readonly pageSize: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  /** `[qLen, kvLen]` of each request, qLen <= kvLen. */
  readonly requests: readonly (readonly [number, number])[];
  /** Slots of the pool, a whole number of pages. */
  readonly S: number;
  /** The slot of each cached token, request after request (repeats allowed: requests may share a prefix). */
  readonly kvSlots: readonly number[];
  readonly qIndptrDType: IndexDType;
  readonly kvIndptrDType: IndexDType;
  readonly slotDType: IndexDType;
  /** Each omitted from the call when undefined. */
  readonly causal: boolean | undefined;
  readonly scale: number | undefined;
  readonly slidingWindow: number | undefined;
  readonly logitSoftcap: number | undefined;
  /** Queries scaled up (sharper softmaxes). */
  readonly qMagnitude: number;
  readonly out: 'given' | 'allocated';
  readonly dataSeed: number;
}

export interface CopySide {
  readonly dtype: PoolDType;
  /** Omitted from the call when undefined (then NHD). */
  readonly layout: PoolLayout | undefined;
  readonly slots: number;
  readonly pageSize: number;
  readonly perHeadScales: boolean;
}

export interface CopyConfig {
  readonly H: number;
  readonly D: number;
  readonly src: CopySide;
  /** 'in place': the destination pools are the source's own (and their scales). */
  readonly dst: CopySide | 'in place';
  /** fp8 destination scales equal to the source's (same-dtype rows then keep their codes). */
  readonly sameScales: boolean;
  /** `[from, to]` of each pair; negative skips, destinations may repeat (the last pair writes). */
  readonly pairs: readonly (readonly [number, number])[];
  readonly fromDType: IndexDType;
  readonly toDType: IndexDType;
  readonly dataSeed: number;
}

const fp8DTypes = fc.constantFrom<Fp8DType>('fp8e4m3', 'fp8e5m2');
const layouts = fc.constantFrom<PoolLayout | undefined>('NHD', 'HND', undefined);

/** A pool of at least `needed` slots (one or more), a whole number of pages of `pageSize` rows. */
const poolSlots = (needed: number, pageSize: number) => Math.max(1, Math.ceil(Math.max(1, needed) / pageSize)) * pageSize;

/** One request: decode, verification, a prefill chunk or a whole prompt; sometimes no queries, sometimes no tokens at all, now and then a long one (a split call on a GPU). */
const attentionRequest: fc.Arbitrary<readonly [number, number]> = fc.oneof(
  { weight: 4, arbitrary: fc.integer({ min: 1, max: 40 }).map((kv) => [1, kv] as const) },
  { weight: 3, arbitrary: fc.integer({ min: 2, max: 40 }).chain((kv) => fc.integer({ min: 2, max: Math.min(kv, 9) }).map((q) => [q, kv] as const)) },
  { weight: 1, arbitrary: fc.integer({ min: 1, max: 24 }).map((kv) => [kv, kv] as const) },
  { weight: 1, arbitrary: fc.constantFrom([0, 0] as const, [0, 5] as const) },
  { weight: 1, arbitrary: fc.integer({ min: 257, max: 420 }).chain((kv) => fc.integer({ min: 1, max: 4 }).map((q) => [q, kv] as const)) },
);

export const attentionConfigs: fc.Arbitrary<AttentionConfig> = fc
  .record({
    dtype: dtypes,
    pool: fc.oneof({ weight: 3, arbitrary: fc.constant<'model'>('model') }, { weight: 2, arbitrary: fp8DTypes }),
    perHeadScales: fc.boolean(),
    layout: layouts,
    pageSize: fc.constantFrom(1, 3, 4, 16),
    H: fc.integer({ min: 1, max: 3 }),
    ratio: fc.constantFrom(1, 2, 4, 8),
    D: headDims,
    requests: fc.array(attentionRequest, { minLength: 1, maxLength: 4 }),
    extraSlots: fc.integer({ min: -8, max: 12 }),
    qIndptrDType: indexDTypes,
    kvIndptrDType: indexDTypes,
    slotDType: indexDTypes,
    causal: fc.constantFrom<boolean | undefined>(true, false, undefined),
    scale: fc.option(fc.constantFrom(0.05, 0.3, 1, 2.5), { nil: undefined, freq: 3 }),
    slidingWindow: fc.option(fc.integer({ min: 1, max: 24 }), { nil: undefined, freq: 3 }),
    logitSoftcap: fc.option(fc.constantFrom(1, 5, 30), { nil: undefined, freq: 4 }),
    qMagnitude: fc.constantFrom(1, 1, 4),
    out: fc.constantFrom<'given' | 'allocated'>('given', 'allocated'),
    dataSeed: dataSeeds,
  })
  .chain(({ pool, ratio, extraSlots, ...c }) => {
    const C = c.requests.reduce((n, [, kv]) => n + kv, 0);
    // A pool smaller than the tokens makes requests share slots; a larger one leaves rows no token names.
    const pageSize = c.layout === 'HND' ? c.pageSize : 1;
    const S = poolSlots(C + extraSlots, pageSize);
    return indices(C, S).map((kvSlots) => ({ ...c, poolDType: pool === 'model' ? c.dtype : pool, Hq: c.H * ratio, pageSize, S, kvSlots }));
  });

const poolDTypes = fc.oneof({ weight: 3, arbitrary: fc.constantFrom<PoolDType>('f32', 'f16', 'bf16') }, { weight: 2, arbitrary: fp8DTypes });

const copySide: fc.Arbitrary<CopySide> = fc
  .record({ dtype: poolDTypes, layout: layouts, pages: fc.integer({ min: 1, max: 6 }), pageSize: fc.constantFrom(1, 2, 4), perHeadScales: fc.boolean() })
  .map(({ pages, ...c }) => ({ ...c, pageSize: c.layout === 'HND' ? c.pageSize : 1, slots: pages * (c.layout === 'HND' ? c.pageSize : 1) }));

/** A slot of a pool of `slots`, or (one pair in six) a negative one: that pair is skipped. */
function pairSlot(slots: number, dtype: IndexDType): fc.Arbitrary<number> {
  return fc.oneof({ weight: 1, arbitrary: negativeSlot(dtype) }, { weight: 5, arbitrary: fc.integer({ min: 0, max: slots - 1 }) });
}

export const copyConfigs: fc.Arbitrary<CopyConfig> = fc
  .record({
    H: fc.integer({ min: 1, max: 3 }),
    D: fc.oneof({ weight: 4, arbitrary: fc.integer({ min: 1, max: 20 }) }, { weight: 1, arbitrary: fc.constantFrom(64, 128) }),
    src: copySide,
    dst: fc.oneof({ weight: 3, arbitrary: copySide }, { weight: 1, arbitrary: fc.constant<'in place'>('in place') }),
    sameScales: fc.boolean(),
    M: fc.oneof({ weight: 1, arbitrary: fc.constant(0) }, { weight: 6, arbitrary: fc.integer({ min: 1, max: 9 }) }),
    fromDType: indexDTypes,
    toDType: indexDTypes,
    dataSeed: dataSeeds,
  })
  .chain(({ M, ...c }) => {
    const dstSlots = c.dst === 'in place' ? c.src.slots : c.dst.slots;
    const pair = fc.tuple(pairSlot(c.src.slots, c.fromDType), pairSlot(dstSlots, c.toDType));
    return fc.array(pair, { minLength: M, maxLength: M }).map((pairs) => ({ ...c, pairs }));
  });
