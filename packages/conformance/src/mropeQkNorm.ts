import type { Backend, FloatDType, IndexDType, Tensor } from '@kvkit/contracts';
import { ropeAngles } from '@kvkit/contracts/backend';
import { describe, it } from 'vitest';
import type { RopeStyle } from './cases.js';
import { patternValues, randomPositive, randomValues, Rng, seedOf, slotPermutation } from './data.js';
import { BOUND, FIXTURE, VALID } from './fixture.js';
import type { Fixture } from './fixture.js';
import { mropeStreamOf, ropePair } from './oracle.js';
import { Checks, ropeBaseTolerance } from './tolerances.js';
import { expectTensor, gatherRows, readFloats, Scope, untyped } from './tensors.js';
import type { ValidationCase } from './validation-cases.js';
import { bitsOf, fromBits, gather, sameBits } from './views.js';

/**
 * ropePoolFused with mRoPE (`positions [3, N]`, `mropeSection`) and with a
 * Q/K-norm (`qNormWeight`, `kNormWeight`, `eps`): the cases, their f64
 * oracle written from the formulas (docs/mrope, docs/qk-norm), and the bad
 * inputs of codes KV065–KV069.
 */

/** Where a case's norm weight comes from: q's dtype, f32, or no norm on that side. */
export type NormWeight = 'same' | 'f32' | undefined;

export interface MropeQkNormCase {
  readonly name: string;
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: RopeStyle;
  readonly ropeBase: number;
  /** Pairs per stream [temporal, height, width]; undefined: one stream, `positions [N]`. */
  readonly mropeSection: readonly [number, number, number] | undefined;
  /** The section in Qwen3-VL's interleaved layout. */
  readonly mropeInterleaved?: boolean;
  readonly qNorm: NormWeight;
  readonly kNorm: NormWeight;
  readonly eps: number;
  readonly S: number;
  /** Slots drawn from [0, S) with repeats (the last token naming a slot writes it), instead of distinct ones. */
  readonly contested: boolean;
  readonly negativeSlots: number;
  readonly maxPosition: number;
  readonly positionDType: IndexDType;
  readonly slotDType: IndexDType;
}

function caseName(c: Omit<MropeQkNormCase, 'name'>): string {
  return [
    c.mropeSection ? `mrope=[${c.mropeSection.join(',')}]${c.mropeInterleaved ? ' interleaved' : ''}` : 'one stream',
    c.qNorm || c.kNorm ? `qNorm:${c.qNorm ?? 'none'} kNorm:${c.kNorm ?? 'none'} eps=${c.eps}` : 'no norm',
    `Hq=${c.Hq} H=${c.H} D=${c.D} R=${c.R} ${c.ropeStyle}`,
    `N=${c.N} S=${c.S}${c.contested ? ' contested' : ''} skip=${c.negativeSlots}`,
    `pos<=${c.maxPosition} pos:${c.positionDType} slots:${c.slotDType}`,
  ].join(' ');
}

const mk = (c: Omit<MropeQkNormCase, 'name'>): MropeQkNormCase => ({ ...c, name: caseName(c) });
const plain = { ropeBase: 10000, eps: 1e-6, contested: false, negativeSlots: 1, positionDType: 'i32', slotDType: 'i32' } as const;

/** mRoPE alone, Q/K-norm alone and both; GQA 1 to 8; full and partial rotary; odd head dims; contested slots; N = 0. */
export const mropeQkNormCases: readonly MropeQkNormCase[] = [
  // Qwen2-VL's shape: head_dim 128, mrope_section [16, 24, 24].
  mk({ ...plain, N: 7, Hq: 4, H: 2, D: 128, R: 128, ropeStyle: 'neox', ropeBase: 1e6, mropeSection: [16, 24, 24], qNorm: undefined, kNorm: undefined, S: 11, maxPosition: 500, positionDType: 'i64' }),
  mk({ ...plain, N: 5, Hq: 8, H: 1, D: 64, R: 32, ropeStyle: 'gptj', mropeSection: [4, 6, 6], qNorm: undefined, kNorm: undefined, S: 9, maxPosition: 80, slotDType: 'i64' }),
  // Qwen3's shape: head_dim 128, q_norm and k_norm in the model's dtype.
  mk({ ...plain, N: 6, Hq: 16, H: 2, D: 128, R: 128, ropeStyle: 'neox', ropeBase: 1e6, mropeSection: undefined, qNorm: 'same', kNorm: 'same', S: 8, maxPosition: 300 }),
  mk({ ...plain, N: 4, Hq: 2, H: 2, D: 80, R: 80, ropeStyle: 'neox', mropeSection: [8, 16, 16], qNorm: 'f32', kNorm: 'f32', eps: 1e-5, S: 6, maxPosition: 200, positionDType: 'i64', slotDType: 'i64' }),
  mk({ ...plain, N: 3, Hq: 6, H: 3, D: 64, R: 64, ropeStyle: 'gptj', mropeSection: undefined, qNorm: 'same', kNorm: undefined, S: 5, maxPosition: 40 }),
  mk({ ...plain, N: 5, Hq: 4, H: 1, D: 32, R: 32, ropeStyle: 'neox', mropeSection: [0, 8, 8], qNorm: undefined, kNorm: 'f32', S: 7, maxPosition: 60, negativeSlots: 2 }),
  mk({ ...plain, N: 4, Hq: 2, H: 1, D: 256, R: 128, ropeStyle: 'neox', mropeSection: [32, 16, 16], qNorm: 'same', kNorm: 'f32', S: 4, maxPosition: 1000, negativeSlots: 0 }),
  // Odd head dims: 16-bit rows off word boundaries, element by element.
  mk({ ...plain, N: 5, Hq: 3, H: 3, D: 7, R: 6, ropeStyle: 'neox', mropeSection: [1, 1, 1], qNorm: 'same', kNorm: 'same', S: 8, maxPosition: 30 }),
  mk({ ...plain, N: 4, Hq: 4, H: 2, D: 9, R: 4, ropeStyle: 'gptj', mropeSection: [1, 0, 1], qNorm: 'f32', kNorm: 'same', S: 6, maxPosition: 25, positionDType: 'i64' }),
  mk({ ...plain, N: 6, Hq: 2, H: 2, D: 5, R: 2, ropeStyle: 'neox', mropeSection: undefined, qNorm: 'same', kNorm: 'same', S: 7, maxPosition: 12 }),
  // Several tokens on one slot: the last of them writes it, whole.
  mk({ ...plain, N: 9, Hq: 4, H: 2, D: 64, R: 64, ropeStyle: 'neox', mropeSection: [8, 12, 12], qNorm: 'same', kNorm: 'same', S: 3, contested: true, maxPosition: 90, slotDType: 'i64' }),
  mk({ ...plain, N: 8, Hq: 2, H: 2, D: 7, R: 6, ropeStyle: 'gptj', mropeSection: [1, 1, 1], qNorm: 'f32', kNorm: 'f32', S: 2, contested: true, maxPosition: 20 }),
  mk({ ...plain, N: 0, Hq: 8, H: 2, D: 64, R: 64, ropeStyle: 'neox', mropeSection: [8, 12, 12], qNorm: 'same', kNorm: 'same', S: 3, negativeSlots: 0, maxPosition: 10 }),
  // Qwen3-VL's shape: head_dim 128, mrope_section [24, 20, 20] interleaved, rope_theta 5e6, q_norm and k_norm.
  mk({ ...plain, N: 7, Hq: 4, H: 2, D: 128, R: 128, ropeStyle: 'neox', ropeBase: 5e6, mropeSection: [24, 20, 20], mropeInterleaved: true, qNorm: 'same', kNorm: 'same', S: 11, maxPosition: 500, positionDType: 'i64' }),
  // Interleaved with a partial rotary (Qwen3.5's [11, 11, 10] over 32 pairs: height's last pair is the last one) and with R/2 = 5 element by element.
  mk({ ...plain, N: 5, Hq: 4, H: 1, D: 128, R: 64, ropeStyle: 'neox', mropeSection: [11, 11, 10], mropeInterleaved: true, qNorm: undefined, kNorm: 'f32', S: 7, maxPosition: 300, slotDType: 'i64' }),
  mk({ ...plain, N: 6, Hq: 3, H: 3, D: 13, R: 10, ropeStyle: 'gptj', mropeSection: [3, 1, 1], mropeInterleaved: true, qNorm: 'f32', kNorm: undefined, S: 4, contested: true, maxPosition: 40 }),
];

export interface MropeQkNormInputs {
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: RopeStyle;
  readonly ropeBase: number;
  readonly mropeSection: readonly number[] | undefined;
  readonly mropeInterleaved?: boolean;
  /** `[N]`, or `[3, N]` flattened (stream s of token n at s * N + n). */
  readonly positions: readonly number[];
  readonly q: ArrayLike<number>;
  readonly k: ArrayLike<number>;
  readonly qNormWeight: ArrayLike<number> | undefined;
  readonly kNormWeight: ArrayLike<number> | undefined;
  readonly eps: number;
}

/**
 * qRot and kRot from the formulas, in f64: each head normed over D
 * (x · (mean(x²) + eps)^-1/2 · w) where its weight is given, then pair j
 * rotated by p_s(j) · f_j, s(j) the stream whose section holds j.
 */
export function mropeQkNormOracle(a: MropeQkNormInputs): { qRot: Float64Array; kRot: Float64Array } {
  const { N, D, R } = a;
  const f = ropeAngles({ ropeBase: a.ropeBase, rotaryDim: R }).frequencies;
  const streamOf = (j: number) => (a.mropeSection ? mropeStreamOf(a.mropeSection, j, a.mropeInterleaved) : 0);
  const apply = (src: ArrayLike<number>, heads: number, weight: ArrayLike<number> | undefined): Float64Array => {
    const out = Float64Array.from(src);
    for (let n = 0; n < N; n++) {
      for (let h = 0; h < heads; h++) {
        const x = out.subarray((n * heads + h) * D, (n * heads + h + 1) * D);
        if (weight) {
          let sum = 0;
          for (let i = 0; i < D; i++) sum += x[i]! ** 2;
          const inv = 1 / Math.sqrt(sum / D + a.eps);
          for (let i = 0; i < D; i++) x[i] = x[i]! * inv * weight[i]!;
        }
        for (let j = 0; j < R / 2; j++) {
          const angle = a.positions[streamOf(j) * N + n]! * f[j]!;
          const [i0, i1] = ropePair(j, R, a.ropeStyle);
          const x0 = x[i0]!;
          const x1 = x[i1]!;
          x[i0] = x0 * Math.cos(angle) - x1 * Math.sin(angle);
          x[i1] = x1 * Math.cos(angle) + x0 * Math.sin(angle);
        }
      }
    }
    return out;
  };
  return { qRot: apply(a.q, a.Hq, a.qNormWeight), kRot: apply(a.k, a.H, a.kNormWeight) };
}

/** Positions of every stream: distinct streams (temporal, height, width of a patch grid differ), flattened `[3, N]`. */
function streamPositions(rng: Rng, c: MropeQkNormCase): number[] {
  const streams = c.mropeSection ? 3 : 1;
  return Array.from({ length: streams * c.N }, () => rng.int(c.maxPosition + 1));
}

function slotsFor(rng: Rng, c: MropeQkNormCase): number[] {
  if (!c.contested) return slotPermutation(rng, c.N, c.S, c.negativeSlots);
  const slots = Array.from({ length: c.N }, () => rng.int(c.S));
  for (let i = 0; i < c.negativeSlots; i++) slots[rng.int(c.N)] = -1;
  return slots;
}

/** Stored values on the backend in `dtype`, and the same values (read back) as f32 on the reference. */
async function twin(s: Scope, r: Scope, dtype: FloatDType, shape: readonly number[], values: ArrayLike<number>): Promise<{ t: Tensor; ref: Tensor; held: Float32Array }> {
  const t = s.float(dtype, shape, values);
  const held = await readFloats(s.backend, t);
  return { t, ref: r.float('f32', shape, held), held };
}

export async function runMropeQkNormCase(backend: Backend, reference: Backend, c: MropeQkNormCase, dtype: FloatDType): Promise<void> {
  const { N, Hq, H, D, R, S } = c;
  const rng = new Rng(seedOf(`ropePoolFused mRoPE/Q-K-norm ${c.name}`));
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks(`ropePoolFused ${c.name} [${dtype}]`);
  try {
    const q = await twin(s, r, dtype, [N, Hq, D], randomValues(rng, N * Hq * D));
    const k = await twin(s, r, dtype, [N, H, D], randomValues(rng, N * H * D));
    const v = await twin(s, r, dtype, [N, H, D], randomValues(rng, N * H * D));
    const kPool = await twin(s, r, dtype, [S, H, D], patternValues(S * H * D));
    const vPool = await twin(s, r, dtype, [S, H, D], patternValues(S * H * D, 11));
    // The reference gets the weights' stored values in f32, so both sides norm with the same numbers.
    const weight = async (which: NormWeight) => (which ? twin(s, r, which === 'f32' ? 'f32' : dtype, [D], randomPositive(rng, D)) : undefined);
    const qW = await weight(c.qNorm);
    const kW = await weight(c.kNorm);
    const positions = streamPositions(rng, c);
    const positionsShape = c.mropeSection ? [3, N] : [N];
    const slots = slotsFor(rng, c);
    const params = {
      numKvHeads: H,
      numQoHeads: Hq,
      headDim: D,
      rotaryDim: R,
      ropeStyle: c.ropeStyle,
      ropeBase: c.ropeBase,
      ...(c.mropeSection ? { mropeSection: c.mropeSection } : {}),
      ...(c.mropeInterleaved ? { mropeInterleaved: true } : {}),
      ...(qW || kW ? { eps: c.eps } : {}),
    };
    const out = untyped(backend).ropePoolFused({
      ...params,
      q: q.t,
      k: k.t,
      v: v.t,
      ...(qW ? { qNormWeight: qW.t } : {}),
      ...(kW ? { kNormWeight: kW.t } : {}),
      positions: s.index(c.positionDType, positionsShape, positions),
      slots: s.index(c.slotDType, [N], slots),
      kPool: kPool.t,
      vPool: vPool.t,
    });
    s.track(out.qRot);
    s.track(out.kRot);
    const ref = untyped(reference).ropePoolFused({
      ...params,
      q: q.ref,
      k: k.ref,
      v: v.ref,
      ...(qW ? { qNormWeight: qW.ref } : {}),
      ...(kW ? { kNormWeight: kW.ref } : {}),
      positions: r.index('i64', positionsShape, positions),
      slots: r.index('i64', [N], slots),
      kPool: kPool.ref,
      vPool: vPool.ref,
    });
    r.track(ref.qRot);
    r.track(ref.kRot);
    await Promise.all([backend.sync(), reference.sync()]);

    expectTensor('qRot', out.qRot, dtype, [N, Hq, D], backend);
    expectTensor('kRot', out.kRot, dtype, [N, H, D], backend);
    const [qRot, kRot, kPoolAfter, vPoolAfter, refQ, refK, refKPool] = await Promise.all([
      readFloats(backend, out.qRot),
      readFloats(backend, out.kRot),
      readFloats(backend, kPool.t),
      readFloats(backend, vPool.t),
      readFloats(reference, ref.qRot),
      readFloats(reference, ref.kRot),
      readFloats(reference, kPool.ref),
    ]);
    const oracle = mropeQkNormOracle({ ...c, positions, q: q.held, k: k.held, qNormWeight: qW?.held, kNormWeight: kW?.held });
    const tol = ropeBaseTolerance(dtype, c.maxPosition);
    const qLayout = { shape: [N, Hq, D], axes: ['n', 'h', 'd'] };
    const kLayout = { shape: [N, H, D], axes: ['n', 'h', 'd'] };
    checks.close('qRot vs CPU reference', qRot, refQ, tol, qLayout);
    checks.close('kRot vs CPU reference', kRot, refK, tol, kLayout);
    checks.close('qRot vs f64 formulas', qRot, oracle.qRot, tol, qLayout);
    checks.close('kRot vs f64 formulas', kRot, oracle.kRot, tol, kLayout);

    // Each slot named holds its last token's rows, bit for bit; every other row is as it was.
    const rowSize = H * D;
    const owner = new Map<number, number>();
    slots.forEach((slot, n) => {
      if (slot >= 0) owner.set(slot, n);
    });
    const written = [...owner.keys()];
    const winners = written.map((slot) => owner.get(slot)!);
    const untouched = Array.from({ length: S }, (_, i) => i).filter((i) => !owner.has(i));
    checks.exact('kPool rows at the slots vs kRot of their last token', gatherRows(kPoolAfter, written, rowSize), gatherRows(kRot, winners, rowSize));
    checks.exact('vPool rows at the slots vs v of their last token', gatherRows(vPoolAfter, written, rowSize), gatherRows(v.held, winners, rowSize));
    checks.close('kPool rows at the slots vs CPU reference', gatherRows(kPoolAfter, written, rowSize), gatherRows(refKPool, written, rowSize), tol);
    checks.exact('kPool rows no token names', gatherRows(kPoolAfter, untouched, rowSize), gatherRows(kPool.held, untouched, rowSize));
    checks.exact('vPool rows no token names', gatherRows(vPoolAfter, untouched, rowSize), gatherRows(vPool.held, untouched, rowSize));
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

/** How a views case lays q, k and v out: views of one fused qkv projection, its rows padded and offset. */
interface QkvViewCase {
  readonly what: string;
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly ropeStyle: RopeStyle;
  readonly mropeSection: readonly [number, number, number];
  /** Spare elements after each token's q, k and v, and before the first token. */
  readonly pad: number;
  readonly offset: number;
  /** k from a tensor stored [N, D, H] (inner stride H) instead of the fused one. */
  readonly kTransposed: boolean;
  /** positions an offset view, qNormWeight a view of every other element. */
  readonly otherViews: boolean;
}

/** Rows read in place on every backend's fast path, rows off 16-byte boundaries, an odd head dim, and an inner stride ≠ 1. */
const qkvViewCases: readonly QkvViewCase[] = [
  { what: 'aligned padded rows', N: 5, Hq: 4, H: 2, D: 64, R: 64, ropeStyle: 'neox', mropeSection: [8, 12, 12], pad: 16, offset: 16, kTransposed: false, otherViews: false },
  { what: 'rows off 16 bytes, positions and weight views', N: 6, Hq: 2, H: 1, D: 64, R: 48, ropeStyle: 'neox', mropeSection: [8, 8, 8], pad: 3, offset: 5, kTransposed: false, otherViews: true },
  { what: 'odd head dim', N: 5, Hq: 3, H: 3, D: 7, R: 6, ropeStyle: 'gptj', mropeSection: [1, 1, 1], pad: 1, offset: 3, kTransposed: false, otherViews: true },
  { what: 'transposed k', N: 4, Hq: 4, H: 2, D: 32, R: 32, ropeStyle: 'neox', mropeSection: [4, 6, 6], pad: 0, offset: 0, kTransposed: true, otherViews: false },
];

/**
 * ropePoolFused with mRoPE and a Q/K-norm on q, k and v as views of one fused
 * qkv projection (splitQkv), and on index and weight views, gives the bits
 * the same call gives on owned contiguous copies: qRot, kRot and both pools.
 */
export async function checkMropeQkNormOnViews(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`ropePoolFused mRoPE + Q/K-norm on views = on owned copies [${dtype}]`);
  const ops = untyped(backend);
  try {
    for (const c of qkvViewCases) {
      const rng = new Rng(seedOf(`mRoPE Q/K-norm views ${c.what} ${dtype}`));
      const { N, Hq, H, D, R } = c;
      const S = N + 3;
      const width = (Hq + 2 * H) * D;
      const row = width + c.pad;
      const fusedBits = bitsOf(dtype, randomValues(rng, c.offset + N * row));
      const fused = fromBits(s, dtype, [c.offset + N * row], fusedBits);
      const split = backend.splitQkv(backend.view(fused, [N, width], { strides: [row, 1], offset: c.offset }), { numQoHeads: Hq, numKvHeads: H, headDim: D });
      const copyOf = (heads: number, first: number) => fromBits(s, dtype, [N, heads, D], gather(fusedBits, [N, heads, D], [row, D, 1], c.offset + first));
      let k = { view: split.k, owned: copyOf(H, Hq * D) };
      if (c.kTransposed) {
        const kT = bitsOf(dtype, randomValues(rng, N * D * H));
        k = { view: backend.view(fromBits(s, dtype, [N * D * H], kT), [N, H, D], { strides: [D * H, 1, H] }), owned: fromBits(s, dtype, [N, H, D], gather(kT, [N, H, D], [D * H, 1, H], 0)) };
      }
      // Distinct streams: temporal, height and width positions drawn apart.
      const positions = Array.from({ length: 3 * N }, () => rng.int(200));
      const positionsOwned = s.index('i64', [3, N], positions);
      const positionsView = c.otherViews ? backend.view(s.index('i64', [3 * N + 2], [7, 7, ...positions]), [3, N], { offset: 2 }) : positionsOwned;
      const qWeightBits = bitsOf(dtype, randomPositive(rng, 2 * D));
      const qWeightOwned = fromBits(s, dtype, [D], gather(qWeightBits, [D], [2], 0));
      const qWeightView = c.otherViews ? backend.view(fromBits(s, dtype, [2 * D], qWeightBits), [D], { strides: [2] }) : qWeightOwned;
      const poolBits = [bitsOf(dtype, randomValues(rng, S * H * D)), bitsOf(dtype, randomValues(rng, S * H * D))];
      const common = {
        numKvHeads: H,
        numQoHeads: Hq,
        headDim: D,
        rotaryDim: R,
        ropeStyle: c.ropeStyle,
        ropeBase: 10000,
        mropeSection: c.mropeSection,
        eps: 1e-6,
        kNormWeight: s.float('f32', [D], randomPositive(rng, D)),
        slots: s.index('i32', [N], slotPermutation(rng, N, S, 1)),
      };
      const run = (args: Record<string, Tensor>) => {
        const [kPool, vPool] = poolBits.map((b) => fromBits(s, dtype, [S, H, D], b)) as [Tensor, Tensor];
        const out = ops.ropePoolFused({ ...common, ...args, kPool, vPool });
        return { qRot: s.track(out.qRot), kRot: s.track(out.kRot), kPool, vPool };
      };
      const onViews = run({ q: split.q, k: k.view, v: split.v, positions: positionsView, qNormWeight: qWeightView });
      const onCopies = run({ q: copyOf(Hq, 0), k: k.owned, v: copyOf(H, (Hq + H) * D), positions: positionsOwned, qNormWeight: qWeightOwned });
      for (const name of ['qRot', 'kRot', 'kPool', 'vPool'] as const) {
        sameBits(checks, `${c.what}: ${name}`, await backend.readBits(onViews[name]), await backend.readBits(onCopies[name]));
      }
    }
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Registers the cases in every dtype; `both` gives the backend under test and the CPU reference. */
export function defineMropeQkNormCases(both: () => [Backend, Backend], dtypes: readonly FloatDType[], timeoutMs: number): void {
  describe('ropePoolFused: mRoPE and Q/K-norm', () => {
    for (const c of mropeQkNormCases) {
      for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runMropeQkNormCase(...both(), c, dtype), timeoutMs);
    }
    for (const dtype of dtypes) it(`mRoPE + Q/K-norm on views of one fused qkv = on owned copies, bit for bit [${dtype}]`, () => checkMropeQkNormOnViews(both()[0], dtype), timeoutMs);
  });
}

const { N, D } = FIXTURE;
const rope = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).ropePoolFused(fx.ropeArgs(over));
/** The fixture's positions as three streams, `[3, N]`. */
const streams = (fx: Fixture) => fx.index('i64', [3, N], [...VALID.ropePositions, ...VALID.ropePositions.map((p) => p + 1), ...VALID.ropePositions.map((p) => p + 2)]);
/** The fixture's R is 4: two rotary pairs to share among the streams. */
const SECTION = [1, 0, 1];

/** The bad inputs of mRoPE and the Q/K-norm, one change each to the fixture's valid ropePoolFused call. */
export const mropeQkNormValidationCases: readonly ValidationCase[] = [
  { code: 'KV065', op: 'ropePoolFused', name: 'mropeSection sums to 3 with R/2 = 2', arg: 'mropeSection', dims: BOUND.ropeParams, mentions: ['[1, 1, 1]', 'R/2 = 2'], call: (fx) => rope(fx, { mropeSection: [1, 1, 1], positions: streams(fx) }) },
  { code: 'KV065', op: 'ropePoolFused', name: 'mropeSection of two counts', arg: 'mropeSection', mentions: ['[1, 1]'], call: (fx) => rope(fx, { mropeSection: [1, 1], positions: streams(fx) }) },
  { code: 'KV065', op: 'ropePoolFused', name: 'mropeSection with a negative count', arg: 'mropeSection', call: (fx) => rope(fx, { mropeSection: [3, -1, 0], positions: streams(fx) }) },
  { code: 'KV065', op: 'ropePoolFused', name: 'mropeSection is a number', arg: 'mropeSection', call: (fx) => rope(fx, { mropeSection: 2, positions: streams(fx) }) },
  { code: 'KV065', op: 'ropePoolFused', name: 'mropeSection with a fractional count', arg: 'mropeSection', call: (fx) => rope(fx, { mropeSection: [0.5, 0.5, 1], positions: streams(fx) }) },
  { code: 'KV066', op: 'ropePoolFused', name: 'positions [3, N] without mropeSection', arg: 'positions', dims: BOUND.rope, mentions: ['[3, 4]'], call: (fx) => rope(fx, { positions: streams(fx) }) },
  { code: 'KV067', op: 'ropePoolFused', name: 'mropeSection with positions [N]', arg: 'positions', dims: BOUND.rope, mentions: ['[3, N] = [3, 4]'], call: (fx) => rope(fx, { mropeSection: SECTION }) },
  { code: 'KV067', op: 'ropePoolFused', name: 'mropeSection with positions [N, 3]', arg: 'positions', call: (fx) => rope(fx, { mropeSection: SECTION, positions: fx.index('i32', [N, 3], Array(3 * N).fill(1)) }) },
  { code: 'KV067', op: 'ropePoolFused', name: 'mropeSection with positions [2, N]', arg: 'positions', call: (fx) => rope(fx, { mropeSection: SECTION, positions: fx.index('i32', [2, N], Array(2 * N).fill(1)) }) },
  { code: 'KV086', op: 'ropePoolFused', name: 'mropeInterleaved without mropeSection', arg: 'mropeInterleaved', mentions: ['mropeSection is missing'], call: (fx) => rope(fx, { mropeInterleaved: true }) },
  { code: 'KV086', op: 'ropePoolFused', name: 'mropeInterleaved with [3, N] positions but no mropeSection', arg: 'mropeInterleaved', call: (fx) => rope(fx, { mropeInterleaved: true, positions: streams(fx) }) },
  { code: 'KV087', op: 'ropePoolFused', name: "interleaved [1, 0, 1]: width's pair 2 past the last pair, 1", arg: 'mropeSection', mentions: ['[1, 0, 1]', 'R/2 = 2', 'past pair 1'], call: (fx) => rope(fx, { mropeSection: SECTION, mropeInterleaved: true, positions: streams(fx) }) },
  { code: 'KV044', op: 'ropePoolFused', name: 'mropeInterleaved as the string "true"', arg: 'mropeInterleaved', call: (fx) => rope(fx, { mropeSection: [1, 1, 0], mropeInterleaved: 'true', positions: streams(fx) }) },
  { code: 'KV034', op: 'ropePoolFused', name: 'mRoPE positions [3, N + 1]', arg: 'positions', mentions: ['[3, 5]', '[3, N] = [3, 4]'], call: (fx) => rope(fx, { mropeSection: SECTION, positions: fx.index('i32', [3, N + 1], Array(3 * (N + 1)).fill(1)) }) },
  { code: 'KV068', op: 'ropePoolFused', name: 'qNormWeight [2, D] (a stack of layers)', arg: 'qNormWeight', dims: BOUND.rope, mentions: ['[D] = [8]'], call: (fx) => rope(fx, { qNormWeight: fx.float('f32', [2, D]), eps: 1e-6 }) },
  { code: 'KV068', op: 'ropePoolFused', name: 'kNormWeight [D + 1]', arg: 'kNormWeight', call: (fx) => rope(fx, { kNormWeight: fx.float('f32', [D + 1]), eps: 1e-6 }) },
  { code: 'KV005', op: 'ropePoolFused', name: 'qNormWeight bf16 beside f32 q', arg: 'qNormWeight', mentions: ['bf16'], call: (fx) => rope(fx, { qNormWeight: fx.float('bf16', [D]), eps: 1e-6 }) },
  { code: 'KV005', op: 'ropePoolFused', name: 'kNormWeight is i32', arg: 'kNormWeight', mentions: ['i32'], call: (fx) => rope(fx, { kNormWeight: fx.any('i32', [D]), eps: 1e-6 }) },
  { code: 'KV069', op: 'ropePoolFused', name: 'qNormWeight without eps', arg: 'eps', mentions: ['qNormWeight without eps'], call: (fx) => rope(fx, { qNormWeight: fx.float('f32', [D]) }) },
  { code: 'KV069', op: 'ropePoolFused', name: 'eps without a norm weight', arg: 'eps', mentions: ['eps without'], call: (fx) => rope(fx, { eps: 1e-6 }) },
  { code: 'KV008', op: 'ropePoolFused', name: 'Q/K-norm eps = -1e-6', arg: 'eps', call: (fx) => rope(fx, { kNormWeight: fx.float('f32', [D]), eps: -1e-6 }) },
  { code: 'KV008', op: 'ropePoolFused', name: 'Q/K-norm eps = NaN', arg: 'eps', call: (fx) => rope(fx, { qNormWeight: fx.float('f32', [D]), eps: Number.NaN }) },
];
