/**
 * Strided views (`backend.view`, `backend.splitQkv`): an op on views gives
 * bit-identical results (readBits) to the same op on owned contiguous copies
 * of the same elements, on every backend; bad views and aliasing are refused
 * with their codes, and nothing is written.
 */
import type { Backend, BitsOf, DType, FloatDType, Tensor } from '@kvkit/contracts';
import { isContractError } from '@kvkit/contracts';
import { encodeHalves } from '@kvkit/contracts/backend';
import { buildCosSinCache, distinctPositions, epsPerLayer, randomPositive, randomValues, Rng, seedOf, slotPermutation } from './data.js';
import { describe, it } from 'vitest';
import { Checks } from './tolerances.js';
import { Scope, untyped } from './tensors.js';

type Bits = Uint16Array | Uint32Array | Int32Array | Float32Array;

export function bitsOf(dtype: FloatDType, values: Float32Array): Uint16Array | Uint32Array {
  if (dtype === 'f32') return new Uint32Array(values.buffer.slice(0));
  const out = new Uint16Array(values.length);
  encodeHalves(dtype, values, out);
  return out;
}

/** The elements of a view of `bits`, gathered on the host in row-major order: what an owned copy holds. */
export function gather<B extends Bits>(bits: B, shape: readonly number[], strides: readonly number[], offset: number): B {
  const n = shape.reduce((a, d) => a * d, 1);
  const out = new (bits.constructor as new (n: number) => B)(n);
  for (let i = 0; i < n; i++) {
    let rest = i;
    let at = offset;
    for (let d = shape.length - 1; d >= 0; d--) {
      at += (rest % shape[d]!) * strides[d]!;
      rest = Math.floor(rest / shape[d]!);
    }
    out[i] = bits[at]!;
  }
  return out;
}

export function sameBits(checks: Checks, what: string, actual: BitsOf<DType>, expected: BitsOf<DType>): void {
  const bad = Array.from(expected as ArrayLike<number | bigint>).findIndex((e, i) => actual[i] !== e);
  checks.that(actual.length === expected.length && bad < 0, `${what}: ${actual.length === expected.length ? `element ${bad} differs` : `${actual.length} elements, expected ${expected.length}`}`);
}

export const fromBits = (s: Scope, dtype: DType, shape: readonly number[], bits: Bits) => s.track(s.backend.tensorFromBits(dtype, shape, bits as never));

/**
 * ropePoolFused with q, k and v as views of one fused projection (rows padded,
 * so the token stride is not the row length), then with a transposed k (inner
 * stride ≠ 1), an offset v, a view of a view for q, and offset pool views;
 * fusedNormRopeStacked with a row-strided kv, a transposed weight, an offset
 * positions view and contiguous offset outputs. Each against the same op on
 * owned contiguous copies, bit for bit.
 */
export async function checkOpsOnViews(backend: Backend, dtype: FloatDType): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks(`ops on views = ops on owned copies [${dtype}]`);
  const ops = untyped(backend);
  const rng = new Rng(seedOf(`ops on views ${dtype}`));
  try {
    const [N, Hq, H, D, R, S] = [7, 4, 2, 8, 6, 11];
    const row = (Hq + 2 * H) * D + 3; // three spare elements per token
    const fusedBits = bitsOf(dtype, randomValues(rng, N * row + 5));
    const fused = fromBits(s, dtype, [N * row + 5], fusedBits);
    const base = backend.view(fused, [N, (Hq + 2 * H) * D], { strides: [row, 1], offset: 5 });
    const split = backend.splitQkv(base, { numQoHeads: Hq, numKvHeads: H, headDim: D });
    const copyOf = (shape: readonly number[], strides: readonly number[], offset: number) => fromBits(s, dtype, shape, gather(fusedBits, shape, strides, offset));
    const owned = { q: copyOf([N, Hq, D], [row, D, 1], 5), k: copyOf([N, H, D], [row, D, 1], 5 + Hq * D), v: copyOf([N, H, D], [row, D, 1], 5 + (Hq + H) * D) };
    // A transposed k: stored [N, D, H], viewed [N, H, D].
    const kT = bitsOf(dtype, randomValues(rng, N * D * H));
    const kTransposed = backend.view(fromBits(s, dtype, [N * D * H], kT), [N, H, D], { strides: [D * H, 1, H] });
    const kTransposedCopy = fromBits(s, dtype, [N, H, D], gather(kT, [N, H, D], [D * H, 1, H], 0));
    // q as a view of a view.
    const qOfQ = backend.view(backend.view(fused, [N * row], { offset: 5 }), [N, Hq, D], { strides: [row, D, 1] });
    const positions = s.index('i32', [N], distinctPositions(rng, N, 64));
    const slots = s.index('i64', [N], slotPermutation(rng, N, S, 2));
    const poolBits = [bitsOf(dtype, randomValues(rng, (S + 1) * H * D)), bitsOf(dtype, randomValues(rng, (S + 1) * H * D))];
    const params = { numKvHeads: H, numQoHeads: Hq, headDim: D, rotaryDim: R, ropeBase: 10000, positions, slots };
    const calls: [string, Record<string, Tensor>, Record<string, Tensor>][] = [
      ['fused qkv views', { q: split.q, k: split.k, v: split.v }, owned],
      ['transposed k, view-of-view q', { q: qOfQ, k: kTransposed, v: split.v }, { q: owned.q, k: kTransposedCopy, v: owned.v }],
    ];
    for (const [what, viewArgs, ownedArgs] of calls) {
      // Pools as offset views (one spare slot in front) against owned pools holding the same bits.
      const poolStores = poolBits.map((b) => fromBits(s, dtype, [(S + 1) * H * D], b));
      const [kPoolView, vPoolView] = poolStores.map((p) => backend.view(p, [S, H, D], { offset: H * D }));
      const [kPool, vPool] = poolBits.map((b) => fromBits(s, dtype, [S, H, D], b.slice(H * D)));
      const a = ops.ropePoolFused({ ...params, ...viewArgs, kPool: kPoolView, vPool: vPoolView });
      const b = ops.ropePoolFused({ ...params, ...ownedArgs, kPool, vPool });
      for (const t of [a.qRot, a.kRot, b.qRot, b.kRot]) s.track(t);
      sameBits(checks, `ropePoolFused ${what}: qRot`, await backend.readBits(a.qRot), await backend.readBits(b.qRot));
      sameBits(checks, `ropePoolFused ${what}: kRot`, await backend.readBits(a.kRot), await backend.readBits(b.kRot));
      sameBits(checks, `ropePoolFused ${what}: kPool`, await backend.readBits(kPoolView!), await backend.readBits(kPool!));
      sameBits(checks, `ropePoolFused ${what}: vPool`, await backend.readBits(vPoolView!), await backend.readBits(vPool!));
      sameBits(checks, `ropePoolFused ${what}: the slot before the pool view untouched`, await backend.readBits(backend.view(poolStores[0]!, [H * D])), poolBits[0]!.slice(0, H * D) as never);
    }

    const [T, L, P] = [5, 3, 13];
    const kvRow = 2 * H * D + 1;
    const kvBits = bitsOf(dtype, randomValues(rng, T * L * kvRow));
    const kvStore = fromBits(s, dtype, [T * L * kvRow], kvBits);
    const kv = backend.view(kvStore, [T, L, 2 * H * D], { strides: [L * kvRow, kvRow, 1] });
    const kvCopy = fromBits(s, dtype, [T, L, 2 * H * D], gather(kvBits, [T, L, 2 * H * D], [L * kvRow, kvRow, 1], 0));
    const wT = bitsOf(dtype, randomPositive(rng, L * D));
    const weight = backend.view(fromBits(s, dtype, [D, L], wT), [L, D], { strides: [1, L] });
    const weightCopy = fromBits(s, dtype, [L, D], gather(wT, [L, D], [1, L], 0));
    const posValues = [0, ...distinctPositions(rng, T, P)];
    const posStore = s.index('i64', [T + 1], posValues);
    const posView = backend.view(posStore, [T], { offset: 1 });
    const common = { eps: s.float('f32', [L], epsPerLayer(L)), cosSinCache: s.float('f32', [P, R], buildCosSinCache(P, R, 10000)), numKvHeads: H, headDim: D, rotaryDim: R };
    const outStore = s.empty(dtype, [2 * L * T * H * D + 1]);
    const [kOut, vOut] = [1, 1 + L * T * H * D].map((offset) => backend.view(outStore, [L, T, H, D], { offset }));
    ops.fusedNormRopeStacked({ ...common, kv, kNormWeight: weight, positions: posView, kOut, vOut });
    const ref = ops.fusedNormRopeStacked({ ...common, kv: kvCopy, kNormWeight: weightCopy, positions: s.index('i64', [T], posValues.slice(1)) });
    s.track(ref.kOut);
    s.track(ref.vOut);
    sameBits(checks, 'fusedNormRopeStacked on views: kOut (offset view)', await backend.readBits(kOut!), await backend.readBits(ref.kOut));
    sameBits(checks, 'fusedNormRopeStacked on views: vOut (offset view)', await backend.readBits(vOut!), await backend.readBits(ref.vOut));
    checks.that(kv.strides.join() === [L * kvRow, kvRow, 1].join(), `a view states its strides: [${kv.strides.join(', ')}]`);
    checks.done();
  } finally {
    s.dispose();
  }
}

function codeOf(f: () => unknown): string | undefined {
  try {
    f();
  } catch (e) {
    return isContractError(e) ? e.code : `not a ContractError: ${String(e)}`;
  }
  return undefined;
}

/**
 * Bad views are refused before anything is made (KV046 strides and offsets,
 * KV047 past the storage, KV029 a fused projection of the wrong width); an op
 * given a strided pool (KV048) or an input overlapping a pool (KV039) writes
 * nothing; a view dies with its base (KV003).
 */
export async function checkViewErrors(backend: Backend): Promise<void> {
  const s = new Scope(backend);
  const checks = new Checks('views refused with their codes, nothing written');
  const ops = untyped(backend);
  const rng = new Rng(seedOf('view errors'));
  try {
    const [N, Hq, H, D, S] = [3, 2, 1, 4, 5];
    const base = s.float('f32', [6, 8], randomValues(rng, 48));
    const expect = (what: string, code: string, f: () => unknown) => {
      const got = codeOf(f);
      checks.that(got === code, `${what}: expected ${code}, got ${got ?? 'no error'}`);
    };
    expect('strides of another rank', 'KV046', () => backend.view(base, [2, 4], { strides: [8] }));
    expect('a negative stride', 'KV046', () => backend.view(base, [2, 4], { strides: [8, -1] }));
    expect('a fractional offset', 'KV046', () => backend.view(base, [4], { offset: 0.5 }));
    expect('a view past its storage', 'KV047', () => backend.view(base, [6, 8], { offset: 1 }));
    expect('a view of a view past the storage', 'KV047', () => backend.view(backend.view(base, [40], { offset: 8 }), [2, 8], { strides: [32, 1], offset: 1 }));
    expect('a fused qkv of the wrong width', 'KV029', () => backend.splitQkv(base, { numQoHeads: 2, numKvHeads: 2, headDim: 3 }));

    const poolValues = [randomValues(rng, (2 * S) * H * D), randomValues(rng, S * H * D)];
    const poolStore = s.float('f32', [2 * S, H, D], poolValues[0]!);
    const vPool = s.float('f32', [S, H, D], poolValues[1]!);
    const before = [await backend.readBits(poolStore), await backend.readBits(vPool)];
    const args = {
      q: s.float('f32', [N, Hq, D], randomValues(rng, N * Hq * D)),
      k: s.float('f32', [N, H, D], randomValues(rng, N * H * D)),
      v: s.float('f32', [N, H, D], randomValues(rng, N * H * D)),
      positions: s.index('i32', [N], [1, 2, 3]),
      slots: s.index('i32', [N], [0, 2, 4]),
      vPool,
      numKvHeads: H,
      numQoHeads: Hq,
      headDim: D,
      ropeBase: 10000,
    };
    const strided = backend.view(poolStore, [S, H, D], { strides: [2 * H * D, D, 1] });
    expect('a strided pool', 'KV048', () => ops.ropePoolFused({ ...args, kPool: strided }));
    const kPool = backend.view(poolStore, [S, H, D]);
    const overlapping = backend.view(poolStore, [N, H, D], { offset: (S - 1) * H * D });
    expect('k overlapping the pool', 'KV039', () => ops.ropePoolFused({ ...args, kPool, k: overlapping }));
    expect('the two pools as views of one tensor, overlapping', 'KV039', () => ops.ropePoolFused({ ...args, kPool, vPool: backend.view(poolStore, [S, H, D], { offset: H * D }) }));
    sameBits(checks, 'pool storage after the refused calls', await backend.readBits(poolStore), before[0]!);
    sameBits(checks, 'vPool after the refused calls', await backend.readBits(vPool), before[1]!);
    // The two halves of one tensor are separate pools: accepted.
    const out = ops.ropePoolFused({ ...args, kPool, vPool: backend.view(poolStore, [S, H, D], { offset: S * H * D }) });
    s.track(out.qRot);
    s.track(out.kRot);

    const owner = backend.tensor('f32', [4], [1, 2, 3, 4]);
    const view = backend.view(owner, [2], { offset: 2 });
    owner.dispose();
    checks.that(view.disposed, 'a view reads as disposed once its base is');
    let readCode: string | undefined;
    try {
      await backend.read(view);
    } catch (e) {
      readCode = isContractError(e) ? e.code : String(e);
    }
    checks.that(readCode === 'KV003', `reading a view of a disposed base: expected KV003, got ${readCode ?? 'no error'}`);
    checks.done();
  } finally {
    s.dispose();
  }
}

/** The view cases of the conformance suite, registered for the backend `backend()` returns. */
export function defineViewCases(backend: () => Backend, dtypes: readonly FloatDType[], timeoutMs: number): void {
  describe('views', () => {
    for (const dtype of dtypes) it(`ops on views = ops on owned copies, bit for bit [${dtype}]`, () => checkOpsOnViews(backend(), dtype), timeoutMs);
    it('bad views, strided pools and overlaps refused with their codes, nothing written', () => checkViewErrors(backend()), timeoutMs);
  });
}
