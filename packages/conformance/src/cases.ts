import type { IndexDType } from '@kvkit/contracts';

/**
 * The numerical cases, as data. Sizes are small (the CPU reference runs every
 * case for every dtype) but cover each head dim of real models, full and
 * partial rotary, both pairings, GQA ratios, negative slots and both index
 * dtypes. Names are what a failing test prints.
 */

export type RopeStyle = 'neox' | 'gptj';

export interface FusedCase {
  readonly name: string;
  readonly T: number;
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  /** Rows of the cos/sin cache. */
  readonly P: number;
  /** Omitted from the call when undefined: the default is neox. */
  readonly ropeStyle: RopeStyle | undefined;
  readonly positionDType: IndexDType;
  /** kNormWeight in kv's dtype, or always f32. */
  readonly weightDType: 'same' | 'f32';
  /** cosSinCache in f32 (recommended), or in kv's dtype. */
  readonly cacheDType: 'f32' | 'same';
  /** Caller-supplied kOut/vOut (filled with a pattern first), or allocated by the op. */
  readonly outputs: 'allocated' | 'given';
  /** Positions may repeat (several tokens at one position). */
  readonly repeatPositions?: boolean;
}

export interface RopePoolCase {
  readonly name: string;
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  /** Omitted from the call when undefined: defaults to D. */
  readonly R: number | undefined;
  readonly ropeStyle: RopeStyle | undefined;
  readonly ropeBase: number;
  /** Slots of the pool; more than N, so some rows are never written. */
  readonly S: number;
  /** How many tokens get a negative slot (not written). */
  readonly negativeSlots: number;
  /** Positions are drawn from [0, maxPosition]. */
  readonly maxPosition: number;
  readonly positionDType: IndexDType;
  readonly slotDType: IndexDType;
}

export type MaterializerRope =
  | { readonly kind: 'cosSinCache'; readonly P: number }
  /** The cache is built by the materializer; maxPositionHint may be smaller than the positions used (it grows). */
  | { readonly kind: 'ropeBase'; readonly ropeBase: number; readonly maxPositionHint?: number };

export interface MaterializerCase {
  readonly name: string;
  readonly entry: 'materialize' | 'materializeInto';
  readonly L: number;
  readonly H: number;
  readonly D: number;
  /** Omitted when undefined: defaults to D. */
  readonly R: number | undefined;
  readonly hidden: number;
  readonly ropeStyle: RopeStyle | undefined;
  readonly rope: MaterializerRope;
  readonly eps: 'number' | 'tensor';
  readonly weightDType: 'same' | 'f32';
  /** T of each successive call on one materializer: workspaces grow and shrink between them. */
  readonly calls: readonly number[];
  /** Largest position used (positions are drawn from [0, maxPosition]; below P for a cache). */
  readonly maxPosition: number;
  readonly positionsShape: '[T]' | '[T, 1]' | '[1, T]';
  readonly positionDType: IndexDType;
  /** materializeInto only: pool slots, and how many tokens skip. */
  readonly S: number;
  readonly negativeSlots: number;
  readonly slotDType: IndexDType;
}

const HEAD_DIMS = [8, 16, 64, 80, 96, 128, 256] as const;
/** A partial rotary dim per head dim: halves, quarters and odd fractions, as real models use. */
const PARTIAL_ROTARY: Readonly<Record<number, number>> = { 8: 2, 16: 6, 64: 32, 80: 32, 96: 64, 128: 64, 256: 64 };

function rotaryName(R: number | undefined, D: number): string {
  return R === undefined ? 'R=default' : R === D ? `R=${R}` : `R=${R}<D`;
}

function fusedName(c: Omit<FusedCase, 'name'>): string {
  const parts = [`D=${c.D} ${rotaryName(c.R, c.D)}`, c.ropeStyle ?? 'style=default', `T=${c.T} L=${c.L} H=${c.H} P=${c.P}`, `pos:${c.positionDType}`];
  if (c.weightDType === 'f32') parts.push('weight:f32');
  if (c.cacheDType === 'same') parts.push('cache:kv-dtype');
  if (c.outputs === 'given') parts.push('outputs given');
  if (c.repeatPositions) parts.push('repeated positions');
  return parts.join(' ');
}

function fused(c: Omit<FusedCase, 'name'>): FusedCase {
  return { ...c, name: fusedName(c) };
}

/** Every head dim × full/partial rotary × neox/gptj, with T, L and H varied across them; then the odd ones out. */
export const fusedNormRopeStackedCases: readonly FusedCase[] = [
  ...HEAD_DIMS.flatMap((D, i) =>
    (['neox', 'gptj'] as const).flatMap((ropeStyle, s) =>
      [D, PARTIAL_ROTARY[D]!].map((R, r) => {
        const k = i * 4 + s * 2 + r;
        const T = D >= 128 ? [1, 2, 3][k % 3]! : [1, 3, 5, 2, 7][k % 5]!;
        return fused({
          T,
          L: 1 + (k % 3),
          H: 1 + ((k + i) % 4),
          D,
          R,
          P: T + 5 + (k % 7),
          ropeStyle,
          positionDType: k % 2 === 0 ? 'i32' : 'i64',
          weightDType: k % 5 === 3 ? 'f32' : 'same',
          cacheDType: k % 7 === 4 ? 'same' : 'f32',
          outputs: k % 3 === 1 ? 'given' : 'allocated',
        });
      }),
    ),
  ),
  fused({ T: 1, L: 1, H: 1, D: 8, R: 8, P: 1, ropeStyle: undefined, positionDType: 'i32', weightDType: 'same', cacheDType: 'f32', outputs: 'allocated' }),
  fused({ T: 33, L: 2, H: 2, D: 64, R: 64, P: 40, ropeStyle: 'neox', positionDType: 'i64', weightDType: 'same', cacheDType: 'f32', outputs: 'given' }),
  fused({ T: 130, L: 1, H: 1, D: 16, R: 8, P: 140, ropeStyle: 'gptj', positionDType: 'i32', weightDType: 'f32', cacheDType: 'f32', outputs: 'allocated' }),
  fused({ T: 6, L: 3, H: 2, D: 80, R: 80, P: 6, ropeStyle: 'neox', positionDType: 'i32', weightDType: 'same', cacheDType: 'same', outputs: 'given' }),
  fused({ T: 9, L: 2, H: 3, D: 64, R: 16, P: 4, ropeStyle: 'gptj', positionDType: 'i64', weightDType: 'same', cacheDType: 'f32', outputs: 'allocated', repeatPositions: true }),
  fused({ T: 0, L: 2, H: 2, D: 64, R: 32, P: 8, ropeStyle: 'neox', positionDType: 'i32', weightDType: 'same', cacheDType: 'f32', outputs: 'allocated' }),
  fused({ T: 0, L: 3, H: 1, D: 16, R: 16, P: 1, ropeStyle: 'gptj', positionDType: 'i64', weightDType: 'f32', cacheDType: 'f32', outputs: 'given' }),
  fused({ T: 4, L: 2, H: 2, D: 128, R: 128, P: 4096, ropeStyle: 'neox', positionDType: 'i32', weightDType: 'f32', cacheDType: 'f32', outputs: 'allocated' }),
];

function ropePoolName(c: Omit<RopePoolCase, 'name'>): string {
  return [
    `Hq/H=${c.Hq / c.H} Hq=${c.Hq} H=${c.H}`,
    `D=${c.D} ${rotaryName(c.R, c.D)}`,
    c.ropeStyle ?? 'style=default',
    `N=${c.N} S=${c.S} skip=${c.negativeSlots}`,
    `base=${c.ropeBase} pos<=${c.maxPosition}`,
    `pos:${c.positionDType} slots:${c.slotDType}`,
  ].join(' ');
}

function ropePool(c: Omit<RopePoolCase, 'name'>): RopePoolCase {
  return { ...c, name: ropePoolName(c) };
}

/** GQA ratios 1, 2, 4, 8 × neox/gptj × full/partial rotary, then defaults, large positions and all-skipped tokens. */
export const ropePoolFusedCases: readonly RopePoolCase[] = [
  ...[1, 2, 4, 8].flatMap((ratio, i) =>
    (['neox', 'gptj'] as const).flatMap((ropeStyle, s) =>
      [false, true].map((partial, r) => {
        const k = i * 4 + s * 2 + r;
        const D = [64, 128, 80, 8, 256, 16, 96, 64][k % 8]!;
        const H = [1, 2, 1, 3][k % 4]!;
        const N = [1, 4, 7, 3, 5][k % 5]!;
        return ropePool({
          N,
          Hq: H * ratio,
          H,
          D,
          R: partial ? PARTIAL_ROTARY[D]! : D,
          ropeStyle,
          ropeBase: [10000, 500000, 1e6, 100][k % 4]!,
          S: N + 3 + (k % 4),
          negativeSlots: k % 3,
          maxPosition: [64, 300, 1000, 2][k % 4]!,
          positionDType: k % 2 === 0 ? 'i32' : 'i64',
          slotDType: k % 4 < 2 ? 'i64' : 'i32',
        });
      }),
    ),
  ),
  ropePool({ N: 5, Hq: 4, H: 2, D: 64, R: undefined, ropeStyle: undefined, ropeBase: 10000, S: 8, negativeSlots: 1, maxPosition: 50, positionDType: 'i32', slotDType: 'i32' }),
  ropePool({ N: 6, Hq: 8, H: 1, D: 128, R: 128, ropeStyle: 'neox', ropeBase: 500000, S: 6, negativeSlots: 0, maxPosition: 8192, positionDType: 'i64', slotDType: 'i64' }),
  ropePool({ N: 3, Hq: 2, H: 2, D: 32, R: 16, ropeStyle: 'gptj', ropeBase: 10000, S: 5, negativeSlots: 3, maxPosition: 20, positionDType: 'i32', slotDType: 'i64' }),
  ropePool({ N: 0, Hq: 8, H: 2, D: 64, R: 32, ropeStyle: 'gptj', ropeBase: 10000, S: 3, negativeSlots: 0, maxPosition: 10, positionDType: 'i64', slotDType: 'i32' }),
  ropePool({ N: 40, Hq: 4, H: 2, D: 16, R: 16, ropeStyle: 'neox', ropeBase: 10000, S: 48, negativeSlots: 5, maxPosition: 100, positionDType: 'i64', slotDType: 'i32' }),
];

function materializerName(c: Omit<MaterializerCase, 'name'>): string {
  const rope =
    c.rope.kind === 'cosSinCache'
      ? `cache P=${c.rope.P}`
      : `ropeBase=${c.rope.ropeBase}${c.rope.maxPositionHint !== undefined ? ` hint=${c.rope.maxPositionHint}` : ''} pos<=${c.maxPosition}`;
  const parts = [
    c.entry,
    `L=${c.L} H=${c.H} D=${c.D} ${rotaryName(c.R, c.D)} hidden=${c.hidden}`,
    c.ropeStyle ?? 'style=default',
    rope,
    `eps:${c.eps}`,
    `T=${c.calls.join(',')}`,
    `pos${c.positionsShape.replace(/ /g, '')}:${c.positionDType}`,
  ];
  if (c.weightDType === 'f32') parts.push('weight:f32');
  if (c.entry === 'materializeInto') parts.push(`S=${c.S} skip=${c.negativeSlots} slots:${c.slotDType}`);
  return parts.join(' ');
}

function materializer(c: Omit<MaterializerCase, 'name'>): MaterializerCase {
  return { ...c, name: materializerName(c) };
}

const base = { S: 0, negativeSlots: 0, slotDType: 'i32' } as const;

/** Both entry points × cosSinCache/ropeBase × eps number/tensor × positions [T], [T, 1], [1, T], and a reused materializer. */
export const kvMaterializerCases: readonly MaterializerCase[] = [
  materializer({ ...base, entry: 'materialize', L: 2, H: 2, D: 64, R: 64, hidden: 96, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 16 }, eps: 'tensor', weightDType: 'same', calls: [5], maxPosition: 15, positionsShape: '[T]', positionDType: 'i32' }),
  materializer({ ...base, entry: 'materialize', L: 3, H: 1, D: 128, R: 64, hidden: 64, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 8 }, eps: 'number', weightDType: 'same', calls: [3], maxPosition: 7, positionsShape: '[T, 1]', positionDType: 'i64' }),
  materializer({ ...base, entry: 'materialize', L: 2, H: 2, D: 80, R: 32, hidden: 48, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 10000 }, eps: 'number', weightDType: 'same', calls: [4], maxPosition: 40, positionsShape: '[1, T]', positionDType: 'i32' }),
  materializer({ ...base, entry: 'materialize', L: 1, H: 4, D: 16, R: 16, hidden: 32, ropeStyle: 'gptj', rope: { kind: 'ropeBase', ropeBase: 500000, maxPositionHint: 64 }, eps: 'tensor', weightDType: 'f32', calls: [6], maxPosition: 63, positionsShape: '[T]', positionDType: 'i64' }),
  materializer({ ...base, entry: 'materialize', L: 2, H: 1, D: 8, R: 4, hidden: 16, ropeStyle: undefined, rope: { kind: 'ropeBase', ropeBase: 10000, maxPositionHint: 4 }, eps: 'number', weightDType: 'same', calls: [3, 5], maxPosition: 900, positionsShape: '[T]', positionDType: 'i32' }),
  materializer({ ...base, entry: 'materialize', L: 2, H: 2, D: 64, R: undefined, hidden: 64, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 40 }, eps: 'tensor', weightDType: 'same', calls: [3, 10, 0, 1, 17, 2], maxPosition: 39, positionsShape: '[T]', positionDType: 'i32' }),
  materializer({ ...base, entry: 'materialize', L: 3, H: 1, D: 256, R: 128, hidden: 32, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 4 }, eps: 'number', weightDType: 'f32', calls: [1], maxPosition: 3, positionsShape: '[1, T]', positionDType: 'i64' }),
  materializer({ entry: 'materializeInto', L: 2, H: 2, D: 64, R: 64, hidden: 96, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 16 }, eps: 'tensor', weightDType: 'same', calls: [5], maxPosition: 15, positionsShape: '[T]', positionDType: 'i32', S: 9, negativeSlots: 1, slotDType: 'i32' }),
  materializer({ entry: 'materializeInto', L: 3, H: 1, D: 96, R: 32, hidden: 40, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 8 }, eps: 'number', weightDType: 'f32', calls: [4], maxPosition: 7, positionsShape: '[T, 1]', positionDType: 'i64', S: 6, negativeSlots: 2, slotDType: 'i64' }),
  materializer({ entry: 'materializeInto', L: 1, H: 3, D: 16, R: 8, hidden: 24, ropeStyle: undefined, rope: { kind: 'ropeBase', ropeBase: 10000 }, eps: 'number', weightDType: 'same', calls: [6], maxPosition: 200, positionsShape: '[1, T]', positionDType: 'i32', S: 12, negativeSlots: 0, slotDType: 'i64' }),
  materializer({ entry: 'materializeInto', L: 2, H: 2, D: 128, R: 128, hidden: 32, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 1e6, maxPositionHint: 8 }, eps: 'tensor', weightDType: 'same', calls: [2, 7, 0, 3], maxPosition: 500, positionsShape: '[T]', positionDType: 'i64', S: 10, negativeSlots: 2, slotDType: 'i32' }),
  materializer({ entry: 'materializeInto', L: 2, H: 1, D: 8, R: 8, hidden: 8, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 5 }, eps: 'tensor', weightDType: 'same', calls: [3], maxPosition: 4, positionsShape: '[T]', positionDType: 'i32', S: 4, negativeSlots: 3, slotDType: 'i32' }),
];
