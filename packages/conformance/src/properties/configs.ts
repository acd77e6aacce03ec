import type { FloatDType, IndexDType } from '@kvkit/contracts';
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
