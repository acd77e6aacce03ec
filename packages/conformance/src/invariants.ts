import type { Backend, FloatDType, IndexDType, Tensor } from '@kvkit/contracts';
import type { FusedCase, RopeStyle } from './cases.js';
import { buildCosSinCache, epsPerLayer, patternValues, randomPositive, randomValues, roundToDType, Rng, seedOf } from './data.js';
import { normedK, ropePair } from './oracle.js';
import { collectLayers } from './run-cases.js';
import { Checks, RELATIVE_TOLERANCE, ropeBaseTolerance } from './tolerances.js';
import { expectTensor, gatherRows, readFloats, readIndices, Scope, untyped } from './tensors.js';

/**
 * Checks that need no reference: properties the math guarantees (rotation
 * keeps lengths, position 0 rotates nothing, the tail past R is only normed),
 * agreements between two ways of asking for the same thing, exact copies,
 * untouched rows, and the T = 0 behaviours. For the CPU backend in f32 these
 * are what the reference comparison cannot be.
 */

type FusedShape = Pick<FusedCase, 'T' | 'L' | 'H' | 'D' | 'R' | 'P'> & { readonly ropeStyle: RopeStyle };

interface PoolShape {
  readonly N: number;
  readonly Hq: number;
  readonly H: number;
  readonly D: number;
}

/** ropePoolFused on random q, k and v (ropeBase 10000), the rest given; its outputs are tracked for disposal. */
function ropePoolOnce(s: Scope, rng: Rng, dtype: FloatDType, shape: PoolShape, rest: { positions: Tensor; slots: Tensor; kPool: Tensor; vPool: Tensor; q?: Tensor; k?: Tensor; v?: Tensor }) {
  const { N, Hq, H, D } = shape;
  const out = untyped(s.backend).ropePoolFused({
    q: rest.q ?? s.float(dtype, [N, Hq, D], randomValues(rng, N * Hq * D)),
    k: rest.k ?? s.float(dtype, [N, H, D], randomValues(rng, N * H * D)),
    v: rest.v ?? s.float(dtype, [N, H, D], randomValues(rng, N * H * D)),
    positions: rest.positions,
    slots: rest.slots,
    kPool: rest.kPool,
    vPool: rest.vPool,
    numKvHeads: H,
    numQoHeads: Hq,
    headDim: D,
    ropeBase: 10000,
  });
  s.track(out.qRot);
  s.track(out.kRot);
  return out;
}

/** Runs fusedNormRopeStacked on random inputs (or the given weight and positions); returns what the backend held and wrote. */
async function fusedOnce(s: Scope, dtype: FloatDType, shape: FusedShape, opts: { weight?: Float32Array; positions?: number[]; seed: string }) {
  const { T, L, H, D, R, P, ropeStyle } = shape;
  const rng = new Rng(seedOf(opts.seed));
  const kv = s.float(dtype, [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D));
  const kNormWeight = s.float(dtype, [L, D], opts.weight ?? randomPositive(rng, L * D));
  const eps = s.float('f32', [L], epsPerLayer(L));
  const positions = opts.positions ?? Array.from({ length: T }, () => rng.int(P));
  const out = untyped(s.backend).fusedNormRopeStacked({
    kv,
    kNormWeight,
    eps,
    cosSinCache: s.float('f32', [P, R], buildCosSinCache(P, R, 10000)),
    positions: s.index('i32', [T], positions),
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
    ropeStyle,
  });
  s.track(out.kOut);
  s.track(out.vOut);
  await s.backend.sync();
  const [kvHeld, weightHeld, epsHeld, k, v] = await Promise.all([
    readFloats(s.backend, kv),
    readFloats(s.backend, kNormWeight),
    readFloats(s.backend, eps),
    readFloats(s.backend, out.kOut),
    readFloats(s.backend, out.vOut),
  ]);
  const kn = normedK({ ...shape, kv: kvHeld, kNormWeight: weightHeld, eps: epsHeld, positions });
  return { k, v, kn, kvHeld, epsHeld, positions };
}

const LAYOUT = (s: FusedShape) => ({ shape: [s.L, s.T, s.H, s.D], axes: ['l', 't', 'h', 'd'] });

/** |out pair| against |normed pair| for every rotated pair, and the tail (i >= R) against the normed K. */
export async function checkRotationKeepsPairNorms(backend: Backend, dtype: FloatDType, ropeStyle: RopeStyle): Promise<void> {
  const shape: FusedShape = { T: 6, L: 2, H: 2, D: 64, R: 48, P: 300, ropeStyle };
  const s = new Scope(backend);
  const checks = new Checks(`fusedNormRopeStacked invariants, ${ropeStyle}, D=64 R=48 [${dtype}]`);
  try {
    const { k, kn } = await fusedOnce(s, dtype, shape, { seed: `pair norms ${ropeStyle}` });
    const heads = shape.L * shape.T * shape.H;
    const got: number[] = [];
    const want: number[] = [];
    const tailGot: number[] = [];
    const tailWant: number[] = [];
    for (let head = 0; head < heads; head++) {
      const o = head * shape.D;
      for (let j = 0; j < shape.R / 2; j++) {
        const [a, b] = ropePair(j, shape.R, ropeStyle);
        got.push(Math.hypot(k[o + a]!, k[o + b]!));
        want.push(Math.hypot(kn[o + a]!, kn[o + b]!));
      }
      for (let i = shape.R; i < shape.D; i++) {
        tailGot.push(k[o + i]!);
        tailWant.push(kn[o + i]!);
      }
    }
    const tol = RELATIVE_TOLERANCE[dtype];
    checks.close('length of each rotated pair vs the normed K', got, want, tol);
    checks.close('elements past rotaryDim vs the normed K (normed, not rotated)', tailGot, tailWant, tol);
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Every token at position 0 (cos 1, sin 0): kOut is the normed K. */
export async function checkPositionZeroIsNormOnly(backend: Backend, dtype: FloatDType, ropeStyle: RopeStyle): Promise<void> {
  const shape: FusedShape = { T: 4, L: 2, H: 3, D: 32, R: 32, P: 3, ropeStyle };
  const s = new Scope(backend);
  const checks = new Checks(`fusedNormRopeStacked at position 0, ${ropeStyle} [${dtype}]`);
  try {
    const { k, kn } = await fusedOnce(s, dtype, shape, { positions: [0, 0, 0, 0], seed: `position 0 ${ropeStyle}` });
    checks.close('kOut at position 0 vs the normed K', k, kn, RELATIVE_TOLERANCE[dtype], LAYOUT(shape));
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Unit weight: each head of kOut has RMS sqrt(m / (m + eps)), m the mean square of its input (rotation keeps the length). */
export async function checkUnitWeightRms(backend: Backend, dtype: FloatDType): Promise<void> {
  const shape: FusedShape = { T: 5, L: 3, H: 2, D: 16, R: 8, P: 50, ropeStyle: 'neox' };
  const s = new Scope(backend);
  const checks = new Checks(`fusedNormRopeStacked with unit weight [${dtype}]`);
  try {
    const { k, kvHeld, epsHeld } = await fusedOnce(s, dtype, shape, { weight: new Float32Array(shape.L * shape.D).fill(1), seed: 'unit weight' });
    const { T, L, H, D } = shape;
    const got: number[] = [];
    const want: number[] = [];
    for (let l = 0; l < L; l++) {
      for (let t = 0; t < T; t++) {
        for (let h = 0; h < H; h++) {
          const o = ((l * T + t) * H + h) * D;
          const src = (t * L + l) * 2 * H * D + h * D;
          let outSq = 0;
          let inSq = 0;
          for (let i = 0; i < D; i++) {
            outSq += k[o + i]! ** 2;
            inSq += kvHeld[src + i]! ** 2;
          }
          const m = inSq / D;
          got.push(Math.sqrt(outSq / D));
          want.push(Math.sqrt(m / (m + epsHeld[l]!)));
        }
      }
    }
    checks.close('RMS of each head of kOut vs sqrt(m / (m + eps[l]))', got, want, RELATIVE_TOLERANCE[dtype]);
    checks.done();
  } finally {
    s.dispose();
  }
}

/** ropePoolFused at position 0 returns q and k unchanged (within the dtype's tolerance). */
export async function checkRopePoolPositionZero(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`ropePoolFused at position 0 [${dtype}]`);
  try {
    const [N, Hq, H, D, S] = [3, 4, 2, 16, 4];
    const rng = new Rng(seedOf('rope pool position 0'));
    const q = s.float(dtype, [N, Hq, D], randomValues(rng, N * Hq * D));
    const k = s.float(dtype, [N, H, D], randomValues(rng, N * H * D));
    const out = ropePoolOnce(s, rng, dtype, { N, Hq, H, D }, {
      q,
      k,
      positions: s.index('i64', [N], [0, 0, 0]),
      slots: s.index('i32', [N], [2, -1, 0]),
      kPool: s.float(dtype, [S, H, D], patternValues(S * H * D)),
      vPool: s.float(dtype, [S, H, D], patternValues(S * H * D, 3)),
    });
    await backend.sync();
    const [qIn, kIn, qRot, kRot] = await Promise.all([readFloats(backend, q), readFloats(backend, k), readFloats(backend, out.qRot), readFloats(backend, out.kRot)]);
    checks.close('qRot at position 0 vs q', qRot, qIn, RELATIVE_TOLERANCE[dtype]);
    checks.close('kRot at position 0 vs k', kRot, kIn, RELATIVE_TOLERANCE[dtype]);
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Every slot negative: nothing is written to either pool, whatever the negative value. */
export async function checkAllSlotsSkipped(backend: Backend, dtype: FloatDType, slotDType: IndexDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`ropePoolFused with every slot negative (${slotDType}) [${dtype}]`);
  try {
    const [N, Hq, H, D, S] = [4, 2, 2, 8, 3];
    const rng = new Rng(seedOf('all slots skipped'));
    const kPool = s.float(dtype, [S, H, D], patternValues(S * H * D));
    const vPool = s.float(dtype, [S, H, D], patternValues(S * H * D, 9));
    const [kBefore, vBefore] = await Promise.all([readFloats(backend, kPool), readFloats(backend, vPool)]);
    const slots = slotDType === 'i64' ? [-1, -(2 ** 40), -3, -(2 ** 53 - 1)] : [-1, -(2 ** 31), -3, -100];
    ropePoolOnce(s, rng, dtype, { N, Hq, H, D }, { positions: s.index('i32', [N], [5, 1, 0, 7]), slots: s.index(slotDType, [N], slots), kPool, vPool });
    await backend.sync();
    const [kAfter, vAfter] = await Promise.all([readFloats(backend, kPool), readFloats(backend, vPool)]);
    checks.exact('kPool', kAfter, kBefore);
    checks.exact('vPool', vAfter, vBefore);
    checks.done();
  } finally {
    s.dispose();
  }
}

export interface MaterializerSetup {
  readonly L: number;
  readonly H: number;
  readonly D: number;
  readonly R: number;
  readonly hidden: number;
}

/** A materializer whose kvWeight is the identity (hidden = 2*H*D), so the projection hands ctxHidden through exactly. */
export async function checkIdentityProjection(backend: Backend, dtype: FloatDType): Promise<void> {
  const [L, H, D, R, T, P] = [2, 2, 16, 8, 5, 12];
  const O = 2 * H * D;
  const s = new Scope(backend);
  const checks = new Checks(`KvMaterializer with identity kvWeight vs fusedNormRopeStacked [${dtype}]`);
  const rng = new Rng(seedOf('identity projection'));
  const identity = new Float32Array(L * O * O);
  for (let l = 0; l < L; l++) for (let o = 0; o < O; o++) identity[(l * O + o) * O + o] = 1;
  const weight = s.float(dtype, [L, D], randomPositive(rng, L * D));
  const eps = s.float('f32', [L], epsPerLayer(L));
  const cache = s.float('f32', [P, R], buildCosSinCache(P, R, 10000));
  try {
    const m = s.owned(untyped(backend).createKvMaterializer({ kvWeight: s.float(dtype, [L, O, O], identity), kNormWeight: weight, eps, cosSinCache: cache, numKvHeads: H, headDim: D, rotaryDim: R, ropeStyle: 'gptj' }));
    const ctxValues = randomValues(rng, T * O);
    const positions = [3, 0, 11, 7, 3];
    const layers = collectLayers(backend, m, s.float(dtype, [T, O], ctxValues), s.index('i32', [T], positions));
    // kv[t, l, :] = ctxHidden[t, :] for every layer: what the identity projection produces.
    const kvValues = new Float32Array(T * L * O);
    for (let t = 0; t < T; t++) for (let l = 0; l < L; l++) kvValues.set(ctxValues.subarray(t * O, (t + 1) * O), (t * L + l) * O);
    const direct = untyped(backend).fusedNormRopeStacked({
      kv: s.float(dtype, [T, L, O], kvValues),
      kNormWeight: weight,
      eps,
      cosSinCache: cache,
      positions: s.index('i32', [T], positions),
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
      ropeStyle: 'gptj',
    });
    s.track(direct.kOut);
    s.track(direct.vOut);
    await backend.sync();
    const [k, v] = await Promise.all([readFloats(backend, direct.kOut), readFloats(backend, direct.vOut)]);
    const size = T * H * D;
    checks.that(layers.length === L, `writeLayerKv called ${layers.length} times; expected ${L}`);
    for (const x of layers) {
      checks.close(`layer ${x.layer} K vs fusedNormRopeStacked`, await x.kData, k.subarray(x.layer * size, (x.layer + 1) * size), RELATIVE_TOLERANCE[dtype]);
      checks.exact(`layer ${x.layer} V vs ctxHidden's V part`, await x.vData, v.subarray(x.layer * size, (x.layer + 1) * size));
    }
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Builds a materializer on random weights; `rope` and `eps` vary between the two that are compared. */
export function materializerOn(s: Scope, dtype: FloatDType, setup: MaterializerSetup, rope: Record<string, unknown>, eps: Tensor | number, seed: string) {
  const rng = new Rng(seedOf(seed));
  const { L, H, D, R, hidden } = setup;
  return untyped(s.backend).createKvMaterializer({
    kvWeight: s.float(dtype, [L, 2 * H * D, hidden], randomValues(rng, L * 2 * H * D * hidden, 0.02, 0.2)),
    kNormWeight: s.float('f32', [L, D], randomPositive(rng, L * D)),
    eps,
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
    ...rope,
  });
}

/** Reads every layer of one materialize call, concatenated `[L, T, H, D]`. */
export async function materializeAll(backend: Backend, m: ReturnType<typeof materializerOn>, ctx: Tensor, positions: Tensor): Promise<{ k: Float32Array; v: Float32Array }> {
  const layers = collectLayers(backend, m, ctx, positions);
  await backend.sync();
  const ks = await Promise.all(layers.map((x) => x.kData));
  const vs = await Promise.all(layers.map((x) => x.vData));
  const join = (parts: Float32Array[]) => {
    const out = new Float32Array(parts.reduce((n, p) => n + p.length, 0));
    let at = 0;
    for (const p of parts) {
      out.set(p, at);
      at += p.length;
    }
    return out;
  };
  return { k: join(ks), v: join(vs) };
}

/**
 * Pairs of calls that must agree: ropeBase vs a cache built here in f64,
 * eps as a number vs the same eps as a tensor, positions [T] vs [T, 1] vs
 * [1, T], and materialize vs materializeInto.
 */
export async function checkMaterializerAgreements(backend: Backend, dtype: FloatDType): Promise<void> {
  const setup: MaterializerSetup = { L: 2, H: 2, D: 32, R: 16, hidden: 24 };
  const { L, H, D, R, hidden } = setup;
  const T = 6;
  const P = 64;
  const epsValue = 2 ** -16;
  const s = new Scope(backend);
  const checks = new Checks(`KvMaterializer agreements [${dtype}]`);
  try {
    const seed = 'materializer agreements';
    const withBase = s.owned(materializerOn(s, dtype, setup, { ropeBase: 10000, maxPositionHint: P }, epsValue, seed));
    const withCache = s.owned(materializerOn(s, dtype, setup, { cosSinCache: s.float('f32', [P, R], buildCosSinCache(P, R, 10000)) }, epsValue, seed));
    const withEpsTensor = s.owned(materializerOn(s, dtype, setup, { ropeBase: 10000, maxPositionHint: P }, s.float('f32', [L], new Float32Array(L).fill(epsValue)), seed));
    const rng = new Rng(seedOf(`${seed} inputs`));
    const ctx = s.float(dtype, [T, hidden], randomValues(rng, T * hidden));
    const positions = [63, 0, 17, 5, 40, 1];
    const flat = await materializeAll(backend, withBase, ctx, s.index('i32', [T], positions));
    const tol = RELATIVE_TOLERANCE[dtype];
    const layout = { shape: [L, T, H, D], axes: ['l', 't', 'h', 'd'] };

    const cached = await materializeAll(backend, withCache, ctx, s.index('i32', [T], positions));
    checks.close('ropeBase vs a cosSinCache built from the same base (K)', flat.k, cached.k, ropeBaseTolerance(dtype, P - 1), layout);
    checks.close('ropeBase vs a cosSinCache built from the same base (V)', flat.v, cached.v, tol, layout);

    const epsTensor = await materializeAll(backend, withEpsTensor, ctx, s.index('i32', [T], positions));
    checks.close('eps as a number vs the same eps as an [L] tensor (K)', epsTensor.k, flat.k, tol, layout);

    for (const shape of [[T, 1], [1, T]]) {
      const other = await materializeAll(backend, withBase, ctx, s.index('i64', shape, positions));
      checks.close(`positions [${shape.join(', ')}] vs [T] (K)`, other.k, flat.k, tol, layout);
      checks.close(`positions [${shape.join(', ')}] vs [T] (V)`, other.v, flat.v, tol, layout);
    }

    const S = 8;
    const slots = [6, -1, 0, 3, -5, 7];
    const kPool = s.float(dtype, [L, S, H, D], patternValues(L * S * H * D));
    const vPool = s.float(dtype, [L, S, H, D], patternValues(L * S * H * D, 2));
    withBase.materializeInto({ ctxHidden: ctx, positions: s.index('i32', [T], positions), kPool, vPool, slots: s.index('i64', [T], slots) });
    await backend.sync();
    const [kAfter, vAfter] = await Promise.all([readFloats(backend, kPool), readFloats(backend, vPool)]);
    const row = H * D;
    const poolRows: number[] = [];
    const viewRows: number[] = [];
    for (let l = 0; l < L; l++) {
      slots.forEach((slot, t) => {
        if (slot >= 0) {
          poolRows.push(l * S + slot);
          viewRows.push(l * T + t);
        }
      });
    }
    checks.close('materializeInto pool rows vs materialize (K)', gatherRows(kAfter, poolRows, row), gatherRows(flat.k, viewRows, row), tol);
    checks.close('materializeInto pool rows vs materialize (V)', gatherRows(vAfter, poolRows, row), gatherRows(flat.v, viewRows, row), tol);
    checks.done();
  } finally {
    s.dispose();
  }
}

/** T = 0 everywhere: empty outputs of the right shape, no callback, no pool row touched (SEMANTICS.md §1–§3). */
export async function checkZeroTokens(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`T = 0 [${dtype}]`);
  const [L, H, D, R, Hq, S, hidden] = [2, 2, 8, 4, 4, 3, 16];
  try {
    const m = s.owned(
      untyped(backend).createKvMaterializer({
        kvWeight: s.float(dtype, [L, 2 * H * D, hidden], randomValues(new Rng(1), L * 2 * H * D * hidden)),
        kNormWeight: s.float(dtype, [L, D], new Float32Array(L * D).fill(1)),
        eps: 1e-6,
        ropeBase: 10000,
        numKvHeads: H,
        headDim: D,
        rotaryDim: R,
      }),
    );
    const fusedArgs = {
      kv: s.float(dtype, [0, L, 2 * H * D], []),
      kNormWeight: s.float('f32', [L, D], new Float32Array(L * D).fill(1)),
      eps: s.float('f32', [L], epsPerLayer(L)),
      cosSinCache: s.float('f32', [5, R], buildCosSinCache(5, R, 10000)),
      positions: s.index('i64', [0], []),
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
    };
    const out = untyped(backend).fusedNormRopeStacked(fusedArgs);
    s.track(out.kOut);
    s.track(out.vOut);
    expectTensor('fusedNormRopeStacked kOut at T = 0', out.kOut, dtype, [L, 0, H, D], backend);
    expectTensor('fusedNormRopeStacked vOut at T = 0', out.vOut, dtype, [L, 0, H, D], backend);
    const given = untyped(backend).fusedNormRopeStacked({ ...fusedArgs, kOut: s.empty(dtype, [L, 0, H, D]), vOut: s.empty(dtype, [L, 0, H, D]) });
    expectTensor('fusedNormRopeStacked given kOut at T = 0', given.kOut, dtype, [L, 0, H, D], backend);

    const pool = (offset: number) => s.float(dtype, [S, H, D], patternValues(S * H * D, offset));
    const [kPool, vPool] = [pool(0), pool(1)];
    const rot = ropePoolOnce(s, new Rng(0), dtype, { N: 0, Hq, H, D }, { positions: s.index('i32', [0], []), slots: s.index('i64', [0], []), kPool, vPool });
    expectTensor('ropePoolFused qRot at N = 0', rot.qRot, dtype, [0, Hq, D], backend);
    expectTensor('ropePoolFused kRot at N = 0', rot.kRot, dtype, [0, H, D], backend);

    let calls = 0;
    m.materialize({ ctxHidden: s.float(dtype, [0, hidden], []), positions: s.index('i32', [0], []), writeLayerKv: () => {
      calls++;
    } });
    checks.that(calls === 0, `materialize at T = 0 called writeLayerKv ${calls} times; expected none`);
    const kPool4 = s.float(dtype, [L, S, H, D], patternValues(L * S * H * D));
    const vPool4 = s.float(dtype, [L, S, H, D], patternValues(L * S * H * D, 4));
    m.materializeInto({ ctxHidden: s.float(dtype, [0, hidden], []), positions: s.index('i64', [0, 1], []), kPool: kPool4, vPool: vPool4, slots: s.index('i32', [0], []) });
    await backend.sync();

    const expectPattern = async (what: string, t: Tensor, n: number, offset: number) => {
      checks.exact(`${what} untouched at T = 0`, await readFloats(backend, t), roundToDType(patternValues(n, offset), dtype));
    };
    await expectPattern('ropePoolFused kPool', kPool, S * H * D, 0);
    await expectPattern('ropePoolFused vPool', vPool, S * H * D, 1);
    await expectPattern('materializeInto kPool', kPool4, L * S * H * D, 0);
    await expectPattern('materializeInto vPool', vPool4, L * S * H * D, 4);
    checks.that((await readFloats(backend, out.kOut)).length === 0, 'kOut at T = 0 reads back non-empty');
    checks.done();
  } finally {
    s.dispose();
  }
}

/** Values that exercise rounding: ties, the ends of the f16 range, subnormals, signed zeros, overflow. */
const ROUNDING_PROBES = [
  1, -1, 0.1, -0.3333333, 1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, 65504, 65519, 65520, -70000, 2 ** -14, 2 ** -24, 3 * 2 ** -25, 2 ** -26, 1e-30,
  0, -0, 3.4e38, -1.5e-40, 1234.5678, Infinity, -Infinity,
];

/** tensor(dtype, data) stores each value rounded once to nearest even; read() gives it back exactly; index tensors keep every value. */
export async function checkTensorRoundTrip(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`tensor() and read() round trip [${dtype}]`);
  try {
    const values = Float32Array.from(ROUNDING_PROBES);
    const t = s.float(dtype, [values.length], values);
    expectTensor('tensor()', t, dtype, [values.length], backend);
    checks.exact(`${dtype} values rounded to nearest even`, await readFloats(backend, t), roundToDType(values, dtype));
    const wide = Float64Array.from([0.1, 1 / 3, -2 / 3, 1e-3]);
    const fromF64 = s.track(backend.tensor('f32', [2, 2], wide));
    checks.exact('f32 from a Float64Array (rounded once)', await readFloats(backend, fromF64), Float32Array.from(wide));
    // Integer typed arrays hold values, never bit patterns: 15360 is 15360, not the f16 bits of 1.0.
    const ints = Uint16Array.from([15360, 16256, 1, 300]);
    const fromInts = s.track(backend.tensor(dtype, [4], ints));
    checks.exact(`${dtype} from a Uint16Array (values, not bits)`, await readFloats(backend, fromInts), roundToDType(ints, dtype));
    const i32 = [0, -1, 2 ** 31 - 1, -(2 ** 31), 12345];
    checks.sameIntegers('i32 values', await readIndices(backend, s.index('i32', [5], i32)), i32);
    const i64 = [0, -1, 2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 40];
    checks.sameIntegers('i64 values', await readIndices(backend, s.index('i64', [5], i64)), i64);
    const big = [2n ** 62n, -(2n ** 63n), 2n ** 63n - 1n];
    const raw = await backend.read(s.track(backend.tensor('i64', [3], BigInt64Array.from(big))));
    checks.that(
      raw instanceof BigInt64Array && big.every((b, i) => raw[i] === b),
      `i64 values beyond 2^53 do not survive: got ${Array.from(raw as ArrayLike<unknown>).join(', ')}`,
    );
    checks.done();
  } finally {
    s.dispose();
  }
}
