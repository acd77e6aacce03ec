import type { Backend, FloatDType, IndexDType } from '@kvkit/contracts';
import { describe, it } from 'vitest';
import type { MaterializerRope, RopeStyle } from './cases.js';
import { buildCosSinCache, epsPerLayer, patternValues, randomPositive, randomValues, Rng, seedOf } from './data.js';
import { fusedNormRopeStackedOracle, projectionOracle } from './oracle.js';
import { collectLayers, twin } from './run-cases.js';
import { Checks, RELATIVE_TOLERANCE, ropeBaseTolerance } from './tolerances.js';
import { gatherRows, readFloats, Scope, untyped } from './tensors.js';
import { BOUND, FIXTURE, VALID } from './fixture.js';
import type { Fixture } from './fixture.js';
import type { ValidationCase } from './validation-cases.js';

/**
 * mRoPE in the materializer and in fusedNormRopeStacked: `positions [3, T]`
 * with `mropeSection`, pair j rotated by the position of its stream (from
 * ropeBase, or the cache row of that position). Each case runs on the backend
 * under test and on the CPU reference, and is held to the f64 formulas of
 * oracle.ts: norm, then per-stream angles, then the pool rows.
 */
export interface MropeMaterializerCase {
  readonly name: string;
  readonly entry: 'materialize' | 'materializeInto' | 'fusedNormRopeStacked';
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  /** Materializer only: the projection's input width. */
  readonly hidden: number;
  readonly ropeStyle: RopeStyle;
  /** fusedNormRopeStacked always takes a cache. */
  readonly rope: MaterializerRope;
  readonly mropeSection: readonly [number, number, number];
  /** The section in Qwen3-VL's interleaved layout. */
  readonly mropeInterleaved?: boolean;
  /** T of each successive call on one materializer. */
  readonly calls: readonly number[];
  /** Every stream's positions are drawn from [0, maxPosition]. */
  readonly maxPosition: number;
  readonly positionDType: IndexDType;
  /** materializeInto: slots of the pool, drawn with repeats (contested: the last token naming a slot writes it). */
  readonly S: number;
  readonly negativeSlots: number;
  readonly slotDType: IndexDType;
}

function caseName(c: Omit<MropeMaterializerCase, 'name'>): string {
  const rope = c.rope.kind === 'ropeBase' ? `ropeBase=${c.rope.ropeBase}` : `cache P=${c.rope.P}`;
  const slots = c.entry === 'materializeInto' ? ` S=${c.S} contested skip=${c.negativeSlots} slots:${c.slotDType}` : '';
  return `${c.entry} mrope=[${c.mropeSection.join(',')}]${c.mropeInterleaved ? ' interleaved' : ''} ${rope} L=${c.L} H=${c.H} D=${c.D} R=${c.R} ${c.ropeStyle} T=${c.calls.join('→')} pos<=${c.maxPosition} pos:${c.positionDType}${slots}`;
}

const mk = (c: Omit<MropeMaterializerCase, 'name'>): MropeMaterializerCase => ({ ...c, name: caseName(c) });
const none = { S: 0, negativeSlots: 0, slotDType: 'i32', hidden: 0 } as const;

/** Qwen2-VL's section at R = 128 (rope_theta 1e6, as its config), partial rotary, odd head dims, odd T, i32 and i64 positions, contested slots. */
export const mropeMaterializerCases: readonly MropeMaterializerCase[] = [
  mk({ ...none, entry: 'materialize', L: 2, H: 2, D: 128, R: 128, hidden: 48, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 1e6 }, mropeSection: [16, 24, 24], calls: [7, 3], maxPosition: 900, positionDType: 'i64' }),
  mk({ ...none, entry: 'materialize', L: 3, H: 1, D: 64, R: 32, hidden: 40, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 33 }, mropeSection: [4, 6, 6], calls: [5], maxPosition: 32, positionDType: 'i32' }),
  mk({ ...none, entry: 'materialize', L: 2, H: 3, D: 9, R: 6, hidden: 16, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 10000, maxPositionHint: 8 }, mropeSection: [1, 1, 1], calls: [1, 5], maxPosition: 60, positionDType: 'i32' }),
  mk({ entry: 'materializeInto', L: 2, H: 2, D: 128, R: 128, hidden: 32, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 1e6 }, mropeSection: [16, 24, 24], calls: [9], maxPosition: 500, positionDType: 'i32', S: 5, negativeSlots: 1, slotDType: 'i64' }),
  mk({ entry: 'materializeInto', L: 1, H: 2, D: 80, R: 80, hidden: 24, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 50 }, mropeSection: [8, 16, 16], calls: [11, 4], maxPosition: 49, positionDType: 'i64', S: 4, negativeSlots: 2, slotDType: 'i32' }),
  mk({ entry: 'materializeInto', L: 2, H: 1, D: 7, R: 4, hidden: 8, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 20 }, mropeSection: [1, 0, 1], calls: [5], maxPosition: 19, positionDType: 'i32', S: 2, negativeSlots: 0, slotDType: 'i32' }),
  mk({ ...none, entry: 'fusedNormRopeStacked', L: 2, H: 2, D: 128, R: 128, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 64 }, mropeSection: [16, 24, 24], calls: [7], maxPosition: 63, positionDType: 'i64' }),
  mk({ ...none, entry: 'fusedNormRopeStacked', L: 3, H: 1, D: 9, R: 8, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 17 }, mropeSection: [0, 3, 1], calls: [5], maxPosition: 16, positionDType: 'i32' }),
  // Qwen3-VL's interleaved layout ([24, 20, 20] at R = 128, rope_theta 5e6), from ropeBase, from a cache, into pools and in the fused op.
  mk({ ...none, entry: 'materialize', L: 2, H: 2, D: 128, R: 128, hidden: 48, ropeStyle: 'neox', rope: { kind: 'ropeBase', ropeBase: 5e6 }, mropeSection: [24, 20, 20], mropeInterleaved: true, calls: [7, 3], maxPosition: 900, positionDType: 'i64' }),
  mk({ entry: 'materializeInto', L: 1, H: 2, D: 80, R: 80, hidden: 24, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 50 }, mropeSection: [14, 13, 13], mropeInterleaved: true, calls: [11, 4], maxPosition: 49, positionDType: 'i64', S: 4, negativeSlots: 2, slotDType: 'i32' }),
  mk({ entry: 'materializeInto', L: 2, H: 1, D: 11, R: 10, hidden: 8, ropeStyle: 'gptj', rope: { kind: 'ropeBase', ropeBase: 10000, maxPositionHint: 8 }, mropeSection: [2, 2, 1], mropeInterleaved: true, calls: [5, 2], maxPosition: 60, positionDType: 'i32', S: 3, negativeSlots: 1, slotDType: 'i64' }),
  mk({ ...none, entry: 'fusedNormRopeStacked', L: 2, H: 2, D: 128, R: 128, ropeStyle: 'neox', rope: { kind: 'cosSinCache', P: 64 }, mropeSection: [24, 20, 20], mropeInterleaved: true, calls: [7], maxPosition: 63, positionDType: 'i64' }),
  mk({ ...none, entry: 'fusedNormRopeStacked', L: 3, H: 1, D: 9, R: 8, ropeStyle: 'gptj', rope: { kind: 'cosSinCache', P: 17 }, mropeSection: [2, 1, 1], mropeInterleaved: true, calls: [5], maxPosition: 16, positionDType: 'i32' }),
];

/** Three distinct streams per token, as a patch grid gives them, flattened [3, T]. */
const streamPositions = (rng: Rng, T: number, maxPosition: number) => Array.from({ length: 3 * T }, () => rng.int(maxPosition + 1));

export async function runMropeMaterializerCase(backend: Backend, reference: Backend, c: MropeMaterializerCase, dtype: FloatDType): Promise<void> {
  const { L, H, D, R } = c;
  const rng = new Rng(seedOf(`mRoPE ${c.name}`));
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks(`mRoPE ${c.name} [${dtype}]`);
  try {
    const weight = await twin(s, r, dtype, [L, D], randomPositive(rng, L * D));
    const eps = await twin(s, r, 'f32', [L], epsPerLayer(L));
    const cache = c.rope.kind === 'cosSinCache' ? await twin(s, r, 'f32', [c.rope.P, R], buildCosSinCache(c.rope.P, R, 10000)) : undefined;
    const ropeBase = c.rope.kind === 'ropeBase' ? c.rope.ropeBase : undefined;
    const tol = ropeBase !== undefined ? ropeBaseTolerance(dtype, c.maxPosition) : RELATIVE_TOLERANCE[dtype];
    const params = { numKvHeads: H, headDim: D, rotaryDim: R, ropeStyle: c.ropeStyle };
    const section = { mropeSection: c.mropeSection, ...(c.mropeInterleaved ? { mropeInterleaved: true } : {}) };
    const oracleOf = (T: number, kv: ArrayLike<number>, positions: readonly number[]) =>
      fusedNormRopeStackedOracle({ T, L, H, D, R, ropeStyle: c.ropeStyle, kv, kNormWeight: weight.held, eps: eps.held, ...(cache ? { cosSinCache: cache.held } : { ropeBase }), positions, ...section });
    const layout = (T: number) => ({ shape: [L, T, H, D], axes: ['l', 't', 'h', 'd'] });

    if (c.entry === 'fusedNormRopeStacked') {
      const T = c.calls[0]!;
      const kv = await twin(s, r, dtype, [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D));
      const positions = streamPositions(rng, T, c.maxPosition);
      const common = { ...params, ...section };
      const out = untyped(backend).fusedNormRopeStacked({ ...common, kv: kv.t, kNormWeight: weight.t, eps: eps.t, cosSinCache: cache!.t, positions: s.index(c.positionDType, [3, T], positions) });
      const ref = untyped(reference).fusedNormRopeStacked({ ...common, kv: kv.ref, kNormWeight: weight.ref, eps: eps.ref, cosSinCache: cache!.ref, positions: r.index('i64', [3, T], positions) });
      for (const t of [out.kOut, out.vOut]) s.track(t);
      for (const t of [ref.kOut, ref.vOut]) r.track(t);
      await Promise.all([backend.sync(), reference.sync()]);
      const [k, v, refK] = await Promise.all([readFloats(backend, out.kOut), readFloats(backend, out.vOut), readFloats(reference, ref.kOut)]);
      const oracle = oracleOf(T, kv.held, positions);
      checks.close('kOut vs CPU reference', k, refK, tol, layout(T));
      checks.close('kOut vs f64 formulas', k, oracle.k, tol, layout(T));
      checks.exact('vOut vs kv, bit for bit', v, oracle.v, layout(T));
      checks.done();
      return;
    }

    const O = 2 * H * D;
    const kvWeight = await twin(s, r, dtype, [L, O, c.hidden], randomValues(rng, L * O * c.hidden, 0.125 / Math.sqrt(c.hidden), 1 / Math.sqrt(c.hidden)));
    const rope = ropeBase !== undefined ? { ropeBase, ...(c.rope.kind === 'ropeBase' && c.rope.maxPositionHint !== undefined ? { maxPositionHint: c.rope.maxPositionHint } : {}) } : {};
    const m = s.owned(untyped(backend).createKvMaterializer({ ...params, ...rope, kvWeight: kvWeight.t, kNormWeight: weight.t, eps: eps.t, ...(cache ? { cosSinCache: cache.t } : {}) }));
    const refM = r.owned(untyped(reference).createKvMaterializer({ ...params, ...rope, kvWeight: kvWeight.ref, kNormWeight: weight.ref, eps: eps.ref, ...(cache ? { cosSinCache: cache.ref } : {}) }));
    for (const [call, T] of c.calls.entries()) {
      const at = c.calls.length > 1 ? ` (call ${call + 1}, T=${T})` : '';
      const ctx = await twin(s, r, dtype, [T, c.hidden], randomValues(rng, T * c.hidden));
      const positions = streamPositions(rng, T, c.maxPosition);
      const pos = s.index(c.positionDType, [3, T], positions);
      const refPos = r.index('i64', [3, T], positions);
      const oracle = oracleOf(T, projectionOracle(ctx.held, kvWeight.held, T, L, O, c.hidden), positions);
      const tokenRow = H * D;
      if (c.entry === 'materialize') {
        const got = collectLayers(backend, m, ctx.t, pos, section);
        const want = collectLayers(reference, refM, ctx.ref, refPos, section);
        await Promise.all([backend.sync(), reference.sync()]);
        checks.that(got.length === L, `writeLayerKv${at}: called ${got.length} times; expected ${L}`);
        for (const [i, x] of got.entries()) {
          const [k, v, refK] = await Promise.all([x.kData, x.vData, want[i]!.kData]);
          const rows = oracle.k.subarray(x.layer * T * tokenRow, (x.layer + 1) * T * tokenRow);
          checks.close(`layer ${x.layer} K vs CPU reference${at}`, k, refK, tol);
          checks.close(`layer ${x.layer} K vs f64 formulas${at}`, k, rows, tol);
          checks.close(`layer ${x.layer} V vs f64 projection${at}`, v, oracle.v.subarray(x.layer * T * tokenRow, (x.layer + 1) * T * tokenRow), tol);
        }
        continue;
      }
      // Slots with repeats and skips: the last token naming a slot writes its rows in every layer, the others nothing.
      const slots = Array.from({ length: T }, () => rng.int(c.S));
      for (let i = 0; i < c.negativeSlots; i++) slots[rng.int(T)] = -1;
      const poolShape = [L, c.S, H, D];
      const kPool = await twin(s, r, dtype, poolShape, patternValues(L * c.S * tokenRow));
      const vPool = await twin(s, r, dtype, poolShape, patternValues(L * c.S * tokenRow, 5));
      m.materializeInto({ ...section, ctxHidden: ctx.t, positions: pos, kPool: kPool.t, vPool: vPool.t, slots: s.index(c.slotDType, [T], slots) });
      refM.materializeInto({ ...section, ctxHidden: ctx.ref, positions: refPos, kPool: kPool.ref, vPool: vPool.ref, slots: r.index('i64', [T], slots) });
      await Promise.all([backend.sync(), reference.sync()]);
      const [kAfter, vAfter, refK] = await Promise.all([readFloats(backend, kPool.t), readFloats(backend, vPool.t), readFloats(reference, kPool.ref)]);
      const owner = new Map<number, number>();
      slots.forEach((slot, t) => {
        if (slot >= 0) owner.set(slot, t);
      });
      const written: number[] = [];
      const sources: number[] = [];
      for (let l = 0; l < L; l++) {
        for (const [slot, t] of owner) {
          written.push(l * c.S + slot);
          sources.push(l * T + t);
        }
      }
      const untouched = Array.from({ length: L * c.S }, (_, row) => row).filter((row) => !written.includes(row));
      checks.close(`kPool rows at the slots vs CPU reference${at}`, gatherRows(kAfter, written, tokenRow), gatherRows(refK, written, tokenRow), tol);
      checks.close(`kPool rows at the slots vs f64 formulas of their last token${at}`, gatherRows(kAfter, written, tokenRow), gatherRows(oracle.k, sources, tokenRow), tol);
      checks.close(`vPool rows at the slots vs f64 projection of their last token${at}`, gatherRows(vAfter, written, tokenRow), gatherRows(oracle.v, sources, tokenRow), tol);
      checks.exact(`kPool rows no token names${at}`, gatherRows(kAfter, untouched, tokenRow), gatherRows(kPool.held, untouched, tokenRow));
      checks.exact(`vPool rows no token names${at}`, gatherRows(vAfter, untouched, tokenRow), gatherRows(vPool.held, untouched, tokenRow));
    }
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

/** Registers the cases in every dtype; `both` gives the backend under test and the CPU reference. */
export function defineMropeMaterializerCases(both: () => [Backend, Backend], dtypes: readonly FloatDType[], timeoutMs: number): void {
  describe('mRoPE in the materializer and fusedNormRopeStacked', () => {
    for (const c of mropeMaterializerCases) {
      for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runMropeMaterializerCase(...both(), c, dtype), timeoutMs);
    }
  });
}

const { T, P } = FIXTURE;
const noop = () => {};
/** The fixture's R is 4: two rotary pairs to share among the streams. */
const SECTION = [1, 0, 1];
/** Three streams of valid positions (inside the fixture's cache), with `changes` written at flat indices of [3, T]. */
const streams = (fx: Fixture, dtype: 'i32' | 'i64', changes: Readonly<Record<number, number>> = {}) => {
  const values: number[] = [...VALID.positions4, ...VALID.positions4.map((p) => 9 - p), ...VALID.positions4];
  for (const [at, value] of Object.entries(changes)) values[Number(at)] = value;
  return fx.index(dtype, [3, T], values);
};
const materialize = (fx: Fixture, over: Record<string, unknown>) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: noop, ...over });
const fused = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).fusedNormRopeStacked(fx.fusedArgs(over));

/** mRoPE's bad inputs in the materializer and fusedNormRopeStacked: the shape and section codes of ropePoolFused, and each stream's values checked as positions are (on the device where they live there, naming their own index). */
export const mropeMaterializerValidationCases: readonly ValidationCase[] = [
  { code: 'KV066', op: 'KvMaterializer.materialize', name: 'positions [3, T] without mropeSection', arg: 'positions', dims: BOUND.materialize, mentions: ['[3, 4]'], call: (fx) => materialize(fx, { positions: streams(fx, 'i32') }) },
  { code: 'KV066', op: 'fusedNormRopeStacked', name: 'positions [3, T] without mropeSection', arg: 'positions', mentions: ['[3, 4]'], call: (fx) => fused(fx, { positions: streams(fx, 'i64') }) },
  { code: 'KV067', op: 'KvMaterializer.materialize', name: 'mropeSection with positions [T]', arg: 'positions', dims: BOUND.materialize, mentions: ['[3, T] = [3, 4]'], call: (fx) => materialize(fx, { mropeSection: SECTION }) },
  { code: 'KV067', op: 'KvMaterializer.materializeInto', name: 'mropeSection with positions [T, 1] (one stream, flattenable)', arg: 'positions', call: (fx) => fx.materializer.materializeInto(fx.intoArgs({ mropeSection: SECTION, positions: fx.index('i32', [T, 1], VALID.positions4) })) },
  { code: 'KV067', op: 'fusedNormRopeStacked', name: 'mropeSection with positions [T, 3]', arg: 'positions', call: (fx) => fused(fx, { mropeSection: SECTION, positions: fx.index('i32', [T, 3], Array(3 * T).fill(1)) }) },
  { code: 'KV065', op: 'KvMaterializer.materializeInto', name: 'mropeSection sums to 3 with R/2 = 2', arg: 'mropeSection', mentions: ['[1, 1, 1]', 'R/2 = 2'], call: (fx) => fx.materializer.materializeInto(fx.intoArgs({ mropeSection: [1, 1, 1], positions: streams(fx, 'i32') })) },
  { code: 'KV065', op: 'fusedNormRopeStacked', name: 'mropeSection of two counts', arg: 'mropeSection', call: (fx) => fused(fx, { mropeSection: [1, 1], positions: streams(fx, 'i32') }) },
  { code: 'KV086', op: 'KvMaterializer.materialize', name: 'mropeInterleaved with [3, T] positions but no mropeSection', arg: 'mropeInterleaved', mentions: ['mropeSection is missing'], call: (fx) => materialize(fx, { mropeInterleaved: true, positions: streams(fx, 'i32') }) },
  { code: 'KV086', op: 'fusedNormRopeStacked', name: 'mropeInterleaved without mropeSection', arg: 'mropeInterleaved', call: (fx) => fused(fx, { mropeInterleaved: true }) },
  { code: 'KV087', op: 'KvMaterializer.materializeInto', name: "interleaved [0, 2, 0]: height's pairs 1 and 4 past the last pair, 1", arg: 'mropeSection', mentions: ['[0, 2, 0]', 'past pair 1'], call: (fx) => fx.materializer.materializeInto(fx.intoArgs({ mropeSection: [0, 2, 0], mropeInterleaved: true, positions: streams(fx, 'i32') })) },
  { code: 'KV087', op: 'fusedNormRopeStacked', name: "interleaved [1, 0, 1]: width's pair 2 past the last pair, 1", arg: 'mropeSection', call: (fx) => fused(fx, { mropeSection: SECTION, mropeInterleaved: true, positions: streams(fx, 'i64') }) },
  { code: 'KV023', op: 'KvMaterializer.materialize', name: 'mRoPE positions [3, T + 1]', arg: 'positions', mentions: ['15 entries', '[3, T] = [3, 4]'], call: (fx) => materialize(fx, { mropeSection: SECTION, positions: fx.index('i32', [3, T + 1], Array(3 * (T + 1)).fill(1)) }) },
  { code: 'KV015', op: 'fusedNormRopeStacked', name: 'mRoPE positions [3, T - 1]', arg: 'positions', mentions: ['[3, 3]'], call: (fx) => fused(fx, { mropeSection: SECTION, positions: fx.index('i64', [3, T - 1], Array(3 * (T - 1)).fill(1)) }) },
  {
    code: 'KV017',
    op: 'KvMaterializer.materializeInto',
    name: 'the height stream of token 1 at P (positions[T + 1]), the rest fine',
    arg: 'positions',
    mentions: [`positions[${T + 1}] = ${P}`],
    deferred: true,
    call: (fx) => fx.materializer.materializeInto(fx.intoArgs({ mropeSection: SECTION, positions: streams(fx, 'i64', { [T + 1]: P }) })),
  },
  {
    code: 'KV017',
    op: 'fusedNormRopeStacked',
    name: 'the width stream of token 3 negative (positions[2T + 3])',
    arg: 'positions',
    mentions: [`positions[${2 * T + 3}] = -1`],
    deferred: true,
    call: (fx) => fused(fx, { mropeSection: SECTION, positions: streams(fx, 'i32', { [2 * T + 3]: -1 }) }),
  },
  {
    code: 'KV017',
    op: 'KvMaterializer.materialize',
    name: 'two bad streams: the first in [3, T] order is named (height of token 3 before width of token 0)',
    arg: 'positions',
    mentions: [`positions[${T + 3}] = ${P + 1}`],
    deferred: true,
    call: (fx) => materialize(fx, { mropeSection: SECTION, positions: streams(fx, 'i32', { [T + 3]: P + 1, [2 * T]: P + 2 }) }),
  },
  {
    code: 'KV028',
    op: 'KvMaterializer.materialize',
    name: 'the width stream of token 0 at 2^31 with ropeBase',
    arg: 'positions',
    mentions: [`positions[${2 * T}] = ${2 ** 31}`],
    deferred: true,
    call: (fx) => fx.baseMaterializer.materialize({ ctxHidden: fx.ctxHidden, mropeSection: SECTION, positions: streams(fx, 'i64', { [2 * T]: 2 ** 31 }), writeLayerKv: noop }),
  },
];
