import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import type { FusedCase, MaterializerCase, RopePoolCase } from './cases.js';
import { buildCosSinCache, distinctPositions, epsPerLayer, patternValues, randomPositive, randomValues, Rng, seedOf, slotPermutation } from './data.js';
import { fusedNormRopeStackedOracle, projectionOracle, ropePoolFusedOracle } from './oracle.js';
import { Checks, RELATIVE_TOLERANCE, ropeBaseTolerance } from './tolerances.js';
import { expectTensor, gatherRows, readFloats, Scope, tensorProblems, untyped } from './tensors.js';

/**
 * One numerical case on the backend under test, checked twice: against the
 * CPU reference given the same (rounded) inputs as f32 tensors, and against
 * the f64 formulas of oracle.ts. Every comparison runs; the test fails once
 * with all the messages.
 */

/** The RoPE base the fused cases' caches are built from. */
const CACHE_BASE = 10000;

function positionsFor(rng: Rng, count: number, maxPosition: number, repeat = false): number[] {
  if (repeat || count > maxPosition + 1) return Array.from({ length: count }, () => rng.int(maxPosition + 1));
  return distinctPositions(rng, count, maxPosition + 1);
}

/** Makes `values` on the backend in `dtype`, and the same stored values (read back) as f32 on the reference. */
export async function twin(s: Scope, r: Scope, dtype: FloatDType, shape: readonly number[], values: ArrayLike<number>): Promise<{ t: Tensor; ref: Tensor; held: Float32Array }> {
  const t = s.float(dtype, shape, values);
  const held = await readFloats(s.backend, t);
  return { t, ref: r.float('f32', shape, held), held };
}

const KOUT_AXES = ['l', 't', 'h', 'd'];

export async function runFusedCase(backend: Backend, reference: Backend, c: FusedCase, dtype: FloatDType): Promise<void> {
  const { T, L, H, D, R, P } = c;
  const rng = new Rng(seedOf(`fusedNormRopeStacked ${c.name}`));
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks(`fusedNormRopeStacked ${c.name} [${dtype}]`);
  try {
    const weightDType = c.weightDType === 'f32' ? 'f32' : dtype;
    const cacheDType = c.cacheDType === 'f32' ? 'f32' : dtype;
    const kv = await twin(s, r, dtype, [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D));
    const weight = await twin(s, r, weightDType, [L, D], randomPositive(rng, L * D));
    const eps = await twin(s, r, 'f32', [L], epsPerLayer(L));
    const cache = await twin(s, r, cacheDType, [P, R], buildCosSinCache(P, R, CACHE_BASE));
    const positions = positionsFor(rng, T, P - 1, c.repeatPositions);
    const params = { numKvHeads: H, headDim: D, rotaryDim: R, ...(c.ropeStyle ? { ropeStyle: c.ropeStyle } : {}) };
    const outShape = [L, T, H, D];
    const given =
      c.outputs === 'given'
        ? { kOut: s.float(dtype, outShape, patternValues(L * T * H * D)), vOut: s.float(dtype, outShape, patternValues(L * T * H * D, 7)) }
        : {};

    const out = untyped(backend).fusedNormRopeStacked({
      ...params,
      kv: kv.t,
      kNormWeight: weight.t,
      eps: eps.t,
      cosSinCache: cache.t,
      positions: s.index(c.positionDType, [T], positions),
      ...given,
    });
    s.track(out.kOut);
    s.track(out.vOut);
    const ref = untyped(reference).fusedNormRopeStacked({
      ...params,
      kv: kv.ref,
      kNormWeight: weight.ref,
      eps: eps.ref,
      cosSinCache: cache.ref,
      positions: r.index('i32', [T], positions),
    });
    r.track(ref.kOut);
    r.track(ref.vOut);
    await Promise.all([backend.sync(), reference.sync()]);

    expectTensor('kOut', out.kOut, dtype, outShape, backend);
    expectTensor('vOut', out.vOut, dtype, outShape, backend);
    const [k, v, refK, kvAfter] = await Promise.all([
      readFloats(backend, given.kOut ?? out.kOut),
      readFloats(backend, given.vOut ?? out.vOut),
      readFloats(reference, ref.kOut),
      readFloats(backend, kv.t),
    ]);
    if (given.kOut && given.kOut !== out.kOut) checks.exact('returned kOut vs the kOut passed in', await readFloats(backend, out.kOut), k);
    const oracle = fusedNormRopeStackedOracle({ T, L, H, D, R, ropeStyle: c.ropeStyle ?? 'neox', kv: kv.held, kNormWeight: weight.held, eps: eps.held, cosSinCache: cache.held, positions });
    const layout = { shape: outShape, axes: KOUT_AXES };
    const tol = RELATIVE_TOLERANCE[dtype];
    checks.close('kOut vs CPU reference', k, refK, tol, layout);
    checks.close('kOut vs f64 formulas', k, oracle.k, tol, layout);
    checks.exact('vOut vs the V half of kv', v, oracle.v, layout);
    checks.exact('kv after the call (inputs are never written)', kvAfter, kv.held);
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

export async function runRopePoolCase(backend: Backend, reference: Backend, c: RopePoolCase, dtype: FloatDType): Promise<void> {
  const { N, Hq, H, D, S } = c;
  const R = c.R ?? D;
  const rng = new Rng(seedOf(`ropePoolFused ${c.name}`));
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks(`ropePoolFused ${c.name} [${dtype}]`);
  try {
    const q = await twin(s, r, dtype, [N, Hq, D], randomValues(rng, N * Hq * D));
    const k = await twin(s, r, dtype, [N, H, D], randomValues(rng, N * H * D));
    const v = await twin(s, r, dtype, [N, H, D], randomValues(rng, N * H * D));
    const kPool = await twin(s, r, dtype, [S, H, D], patternValues(S * H * D));
    const vPool = await twin(s, r, dtype, [S, H, D], patternValues(S * H * D, 11));
    const positions = positionsFor(rng, N, c.maxPosition);
    const slots = slotPermutation(rng, N, S, c.negativeSlots);
    const params = {
      numKvHeads: H,
      numQoHeads: Hq,
      headDim: D,
      ropeBase: c.ropeBase,
      ...(c.R !== undefined ? { rotaryDim: c.R } : {}),
      ...(c.ropeStyle ? { ropeStyle: c.ropeStyle } : {}),
    };
    const out = untyped(backend).ropePoolFused({
      ...params,
      q: q.t,
      k: k.t,
      v: v.t,
      positions: s.index(c.positionDType, [N], positions),
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
      positions: r.index('i64', [N], positions),
      slots: r.index('i64', [N], slots),
      kPool: kPool.ref,
      vPool: vPool.ref,
    });
    r.track(ref.qRot);
    r.track(ref.kRot);
    await Promise.all([backend.sync(), reference.sync()]);

    expectTensor('qRot', out.qRot, dtype, [N, Hq, D], backend);
    expectTensor('kRot', out.kRot, dtype, [N, H, D], backend);
    const [qRot, kRot, kPoolAfter, vPoolAfter, refQ, refK, refKPool, qAfter, kAfter, vAfter] = await Promise.all([
      readFloats(backend, out.qRot),
      readFloats(backend, out.kRot),
      readFloats(backend, kPool.t),
      readFloats(backend, vPool.t),
      readFloats(reference, ref.qRot),
      readFloats(reference, ref.kRot),
      readFloats(reference, kPool.ref),
      readFloats(backend, q.t),
      readFloats(backend, k.t),
      readFloats(backend, v.t),
    ]);
    const oracle = ropePoolFusedOracle({ N, Hq, H, D, R, ropeStyle: c.ropeStyle ?? 'neox', ropeBase: c.ropeBase, q: q.held, k: k.held, positions });
    const tol = ropeBaseTolerance(dtype, c.maxPosition);
    const qLayout = { shape: [N, Hq, D], axes: ['n', 'h', 'd'] };
    const kLayout = { shape: [N, H, D], axes: ['n', 'h', 'd'] };
    checks.close('qRot vs CPU reference', qRot, refQ, tol, qLayout);
    checks.close('kRot vs CPU reference', kRot, refK, tol, kLayout);
    checks.close('qRot vs f64 formulas', qRot, oracle.qRot, tol, qLayout);
    checks.close('kRot vs f64 formulas', kRot, oracle.kRot, tol, kLayout);
    checkPoolRows(checks, { slots, S, rowSize: H * D, kPoolAfter, vPoolAfter, kPoolBefore: kPool.held, vPoolBefore: vPool.held, kRot, v: v.held, refKPool, tol });
    checks.exact('q after the call (inputs are never written)', qAfter, q.held);
    checks.exact('k after the call', kAfter, k.held);
    checks.exact('v after the call', vAfter, v.held);
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

/** Pool rows at the tokens' slots hold kRot and v (bit for bit) and match the reference; every other row is untouched. */
function checkPoolRows(
  checks: Checks,
  a: {
    slots: readonly number[];
    S: number;
    rowSize: number;
    kPoolAfter: Float32Array;
    vPoolAfter: Float32Array;
    kPoolBefore: Float32Array;
    vPoolBefore: Float32Array;
    kRot: Float32Array;
    v: Float32Array;
    refKPool: Float32Array;
    tol: number;
  },
): void {
  const tokens = a.slots.map((slot, n) => ({ slot, n })).filter((x) => x.slot >= 0);
  const written = tokens.map((x) => x.slot);
  const untouched = Array.from({ length: a.S }, (_, s) => s).filter((s) => !written.includes(s));
  const rows = tokens.map((x) => x.n);
  checks.exact('kPool rows at the slots vs kRot', gatherRows(a.kPoolAfter, written, a.rowSize), gatherRows(a.kRot, rows, a.rowSize));
  checks.exact('vPool rows at the slots vs v', gatherRows(a.vPoolAfter, written, a.rowSize), gatherRows(a.v, rows, a.rowSize));
  checks.close('kPool rows at the slots vs CPU reference', gatherRows(a.kPoolAfter, written, a.rowSize), gatherRows(a.refKPool, written, a.rowSize), a.tol);
  checks.exact(`kPool rows no token names (${untouched.join(', ') || 'none'})`, gatherRows(a.kPoolAfter, untouched, a.rowSize), gatherRows(a.kPoolBefore, untouched, a.rowSize));
  checks.exact(`vPool rows no token names (${untouched.join(', ') || 'none'})`, gatherRows(a.vPoolAfter, untouched, a.rowSize), gatherRows(a.vPoolBefore, untouched, a.rowSize));
}

function positionsShape(c: MaterializerCase, T: number): number[] {
  return c.positionsShape === '[T]' ? [T] : c.positionsShape === '[T, 1]' ? [T, 1] : [1, T];
}

export async function runMaterializerCase(backend: Backend, reference: Backend, c: MaterializerCase, dtype: FloatDType): Promise<void> {
  const { L, H, D, hidden } = c;
  const R = c.R ?? D;
  const O = 2 * H * D;
  const rng = new Rng(seedOf(`KvMaterializer ${c.name}`));
  const s = new Scope(backend);
  const r = new Scope(reference);
  const checks = new Checks(`KvMaterializer ${c.name} [${dtype}]`);
  try {
    const weightDType = c.weightDType === 'f32' ? 'f32' : dtype;
    const kvWeight = await twin(s, r, dtype, [L, O, hidden], randomValues(rng, L * O * hidden, 0.125 / Math.sqrt(hidden), 1 / Math.sqrt(hidden)));
    const weight = await twin(s, r, weightDType, [L, D], randomPositive(rng, L * D));
    // 2^-17: exact in f32, so the number and the tensor forms mean the same eps.
    const epsNumber = 2 ** -17;
    const epsTensor = c.eps === 'tensor' ? await twin(s, r, 'f32', [L], epsPerLayer(L)) : undefined;
    const epsValues = epsTensor?.held ?? new Float32Array(L).fill(epsNumber);
    const cache = c.rope.kind === 'cosSinCache' ? await twin(s, r, 'f32', [c.rope.P, R], buildCosSinCache(c.rope.P, R, CACHE_BASE)) : undefined;
    const rope =
      c.rope.kind === 'ropeBase'
        ? { ropeBase: c.rope.ropeBase, ...(c.rope.maxPositionHint !== undefined ? { maxPositionHint: c.rope.maxPositionHint } : {}) }
        : {};
    const params = {
      numKvHeads: H,
      headDim: D,
      ...(c.R !== undefined ? { rotaryDim: c.R } : {}),
      ...(c.ropeStyle ? { ropeStyle: c.ropeStyle } : {}),
      ...rope,
    };
    const m = s.owned(untyped(backend).createKvMaterializer({ ...params, kvWeight: kvWeight.t, kNormWeight: weight.t, eps: epsTensor?.t ?? epsNumber, ...(cache ? { cosSinCache: cache.t } : {}) }));
    const refM = r.owned(untyped(reference).createKvMaterializer({ ...params, kvWeight: kvWeight.ref, kNormWeight: weight.ref, eps: epsTensor?.ref ?? epsNumber, ...(cache ? { cosSinCache: cache.ref } : {}) }));
    const ropeBase = c.rope.kind === 'ropeBase' ? c.rope.ropeBase : undefined;
    const tol = c.rope.kind === 'ropeBase' ? ropeBaseTolerance(dtype, c.maxPosition) : RELATIVE_TOLERANCE[dtype];

    for (const [call, T] of c.calls.entries()) {
      const ctx = await twin(s, r, dtype, [T, hidden], randomValues(rng, T * hidden));
      const positions = positionsFor(rng, T, c.maxPosition);
      const pos = s.index(c.positionDType, positionsShape(c, T), positions);
      const refPos = r.index('i32', [T], positions);
      const proj = projectionOracle(ctx.held, kvWeight.held, T, L, O, hidden);
      const oracle = fusedNormRopeStackedOracle({
        T,
        L,
        H,
        D,
        R,
        ropeStyle: c.ropeStyle ?? 'neox',
        kv: proj,
        kNormWeight: weight.held,
        eps: epsValues,
        ...(cache ? { cosSinCache: cache.held } : { ropeBase }),
        positions,
      });
      const at = c.calls.length > 1 ? ` (call ${call + 1}, T=${T})` : '';
      if (c.entry === 'materialize') {
        await checkMaterialize(checks, { backend, reference, m, refM, ctx, pos, refPos, T, L, H, D, dtype, oracle, tol, at });
      } else {
        await checkMaterializeInto(checks, { backend, reference, s, r, m, refM, ctx, pos, refPos, T, L, H, D, dtype, oracle, tol, at, c, rng, positions });
      }
    }
    checks.done();
  } finally {
    s.dispose();
    r.dispose();
  }
}

interface MaterializeCheck {
  backend: Backend;
  reference: Backend;
  m: { materialize(args: unknown): void };
  refM: { materialize(args: unknown): void };
  ctx: { t: Tensor; ref: Tensor };
  pos: Tensor;
  refPos: Tensor;
  T: number;
  L: number;
  H: number;
  D: number;
  dtype: FloatDType;
  oracle: { k: Float64Array; v: Float64Array };
  tol: number;
  at: string;
}

/** Runs materialize, reading each layer's views inside the callback (the only time they are valid). */
export function collectLayers(backend: Backend, m: MaterializeCheck['m'], ctx: Tensor, pos: Tensor, more: Record<string, unknown> = {}): { layer: number; k: Tensor; v: Tensor; kData: Promise<Float32Array>; vData: Promise<Float32Array> }[] {
  const layers: { layer: number; k: Tensor; v: Tensor; kData: Promise<Float32Array>; vData: Promise<Float32Array> }[] = [];
  m.materialize({ ...more, ctxHidden: ctx, positions: pos, writeLayerKv: (layer: number, k: Tensor, v: Tensor) => {
    layers.push({ layer, k, v, kData: readFloats(backend, k), vData: readFloats(backend, v) });
  } });
  return layers;
}

async function checkMaterialize(checks: Checks, a: MaterializeCheck): Promise<void> {
  const got = collectLayers(a.backend, a.m, a.ctx.t, a.pos);
  const want = collectLayers(a.reference, a.refM, a.ctx.ref, a.refPos);
  await Promise.all([a.backend.sync(), a.reference.sync()]);
  const order = got.map((x) => x.layer);
  // T = 0 does nothing and calls nothing (SEMANTICS.md §2).
  const layers = a.T === 0 ? [] : Array.from({ length: a.L }, (_, i) => i);
  checks.that(
    order.length === layers.length && order.every((l, i) => l === layers[i]),
    `writeLayerKv${a.at}: called for layers [${order.join(', ')}]; expected [${layers.join(', ')}], once each, in order`,
  );
  const layerSize = a.T * a.H * a.D;
  const layout = { shape: [a.T, a.H, a.D], axes: ['t', 'h', 'd'] };
  for (const [i, x] of got.entries()) {
    for (const [name, view] of [['k', x.k], ['v', x.v]] as const) {
      const problems = tensorProblems(view, a.dtype, [a.T, a.H, a.D], a.backend);
      checks.that(problems.length === 0, `${name} view of layer ${x.layer}${a.at}: ${problems.join('; ')}`);
    }
    checks.that(x.k.disposed && x.v.disposed, `layer ${x.layer} views${a.at}: still usable after writeLayerKv returned (disposed=${x.k.disposed}/${x.v.disposed})`);
    const [k, v, refK, refV] = await Promise.all([x.kData, x.vData, want[i]!.kData, want[i]!.vData]);
    const l = x.layer;
    const oracleK = a.oracle.k.subarray(l * layerSize, (l + 1) * layerSize);
    const oracleV = a.oracle.v.subarray(l * layerSize, (l + 1) * layerSize);
    checks.close(`layer ${l} K vs CPU reference${a.at}`, k, refK, a.tol, layout);
    checks.close(`layer ${l} V vs CPU reference${a.at}`, v, refV, a.tol, layout);
    checks.close(`layer ${l} K vs f64 formulas${a.at}`, k, oracleK, a.tol, layout);
    checks.close(`layer ${l} V vs f64 projection${a.at}`, v, oracleV, a.tol, layout);
  }
}

interface MaterializeIntoCheck extends Omit<MaterializeCheck, 'm' | 'refM'> {
  s: Scope;
  r: Scope;
  m: { materializeInto(args: unknown): void };
  refM: { materializeInto(args: unknown): void };
  c: MaterializerCase;
  rng: Rng;
  positions: readonly number[];
}

async function checkMaterializeInto(checks: Checks, a: MaterializeIntoCheck): Promise<void> {
  const { T, L, H, D, c } = a;
  const S = c.S;
  const poolShape = [L, S, H, D];
  const n = L * S * H * D;
  const kPool = await twin(a.s, a.r, a.dtype, poolShape, patternValues(n));
  const vPool = await twin(a.s, a.r, a.dtype, poolShape, patternValues(n, 5));
  const slots = slotPermutation(a.rng, T, S, c.negativeSlots);
  a.m.materializeInto({ ctxHidden: a.ctx.t, positions: a.pos, kPool: kPool.t, vPool: vPool.t, slots: a.s.index(c.slotDType, [T], slots) });
  a.refM.materializeInto({ ctxHidden: a.ctx.ref, positions: a.refPos, kPool: kPool.ref, vPool: vPool.ref, slots: a.r.index('i32', [T], slots) });
  await Promise.all([a.backend.sync(), a.reference.sync()]);
  const [kAfter, vAfter, refK, refV] = await Promise.all([
    readFloats(a.backend, kPool.t),
    readFloats(a.backend, vPool.t),
    readFloats(a.reference, kPool.ref),
    readFloats(a.reference, vPool.ref),
  ]);
  const rowSize = H * D;
  const written: number[] = [];
  const sources: number[] = [];
  for (let l = 0; l < L; l++) {
    slots.forEach((slot, t) => {
      if (slot < 0) return;
      written.push(l * S + slot);
      sources.push(l * T + t);
    });
  }
  const untouched = Array.from({ length: L * S }, (_, row) => row).filter((row) => !written.includes(row));
  checks.close(`kPool rows at the slots vs CPU reference${a.at}`, gatherRows(kAfter, written, rowSize), gatherRows(refK, written, rowSize), a.tol);
  checks.close(`vPool rows at the slots vs CPU reference${a.at}`, gatherRows(vAfter, written, rowSize), gatherRows(refV, written, rowSize), a.tol);
  checks.close(`kPool rows at the slots vs f64 formulas${a.at}`, gatherRows(kAfter, written, rowSize), gatherRows(a.oracle.k, sources, rowSize), a.tol);
  checks.close(`vPool rows at the slots vs f64 projection${a.at}`, gatherRows(vAfter, written, rowSize), gatherRows(a.oracle.v, sources, rowSize), a.tol);
  checks.exact(`kPool rows no token names${a.at}`, gatherRows(kAfter, untouched, rowSize), gatherRows(kPool.held, untouched, rowSize));
  checks.exact(`vPool rows no token names${a.at}`, gatherRows(vAfter, untouched, rowSize), gatherRows(vPool.held, untouched, rowSize));
}
