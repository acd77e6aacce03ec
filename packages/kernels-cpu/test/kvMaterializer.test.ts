import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { cpuBackendStats, createCpuBackend } from '../src/index.js';
import { bitsOf, cosSinRows, expectMatches, expectSameValues, randn, randomInts, referenceNormRope, rng, thrown, uniform } from './helpers.js';

interface Model {
  L: number;
  H: number;
  D: number;
  R: number;
  hidden: number;
  dtype: FloatDType;
  style: 'neox' | 'gptj';
  P: number;
  seed: number;
}

function model(b: Backend, m: Model) {
  const next = rng(m.seed);
  const { L, H, D, R, hidden, P } = m;
  return {
    kvWeight: b.tensor(m.dtype, [L, 2 * H * D, hidden] as number[], randn(next, L * 2 * H * D * hidden, 1 / Math.sqrt(hidden))),
    kNormWeight: b.tensor(m.seed % 2 ? 'f32' : m.dtype, [L, D] as number[], uniform(next, L * D, 0.5, 1.5)),
    eps: b.tensor('f32', [L] as number[], uniform(next, L, 1e-6, 1e-5)),
    cosSinCache: b.tensor('f32', [P, R] as number[], cosSinRows(P, R, 10000)),
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
    ropeStyle: m.style,
  };
}

function tokens(b: Backend, m: Model, T: number, seed: number, maxPosition = m.P) {
  const next = rng(seed);
  const positions = randomInts(next, T, maxPosition);
  return { ctxHidden: b.tensor(m.dtype, [T, m.hidden] as number[], randn(next, T * m.hidden)), positions, positionsTensor: b.tensor('i32', [T] as number[], positions) };
}

/** Runs materialize and collects each layer's K and V, read inside the callback. */
async function materialized(run: (cb: (layer: number, k: Tensor, v: Tensor) => void) => void, b: Backend) {
  const reads: Promise<[number, Float32Array, Float32Array]>[] = [];
  run((layer, k, v) => {
    reads.push(Promise.all([layer, b.read(k) as Promise<Float32Array>, b.read(v) as Promise<Float32Array>]));
  });
  return Promise.all(reads);
}

/** ctxHidden @ kvWeight[l]^T for every layer, summed in f64 in index order, unrounded: [T, L, 2*H*D]. */
async function projection(b: Backend, m: Model, weights: Tensor, ctxHidden: Tensor, T: number): Promise<number[]> {
  const x = (await b.read(ctxHidden)) as Float32Array;
  const w = (await b.read(weights)) as Float32Array;
  const rows = 2 * m.H * m.D;
  const out: number[] = [];
  for (let t = 0; t < T; t++) {
    for (let r = 0; r < m.L * rows; r++) {
      let acc = 0;
      for (let i = 0; i < m.hidden; i++) acc += x[t * m.hidden + i]! * w[r * m.hidden + i]!;
      out.push(acc);
    }
  }
  return out;
}

const layerOf = (all: ArrayLike<number>, l: number, T: number, m: Model) => Array.from(all).slice(l * T * m.H * m.D, (l + 1) * T * m.H * m.D);

describe('materialize', () => {
  const models = fc.record({
    L: fc.integer({ min: 1, max: 3 }),
    H: fc.integer({ min: 1, max: 3 }),
    halfD: fc.integer({ min: 1, max: 16 }),
    halfR: fc.integer({ min: 1, max: 16 }),
    hidden: fc.integer({ min: 1, max: 40 }),
    dtype: fc.constantFrom('f32', 'f16', 'bf16' as const),
    style: fc.constantFrom('neox', 'gptj' as const),
    T: fc.integer({ min: 1, max: 6 }),
    seed: fc.integer({ min: 0, max: 2 ** 30 }),
  });

  it('equals the projection (rounded once to the model dtype) followed by fusedNormRopeStacked, bit for bit', async () => {
    const b = createCpuBackend();
    await forEverySeed(40, (run) => fc.assert(
      fc.asyncProperty(models, async (s) => {
        const m: Model = { ...s, D: 2 * s.halfD, R: 2 * Math.min(s.halfR, s.halfD), P: 32 };
        const w = model(b, m);
        const { ctxHidden, positions, positionsTensor } = tokens(b, m, s.T, s.seed + 1);
        const mat = b.createKvMaterializer(w);
        const layers = await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b);
        const kv = b.tensor(m.dtype, [s.T, m.L, 2 * m.H * m.D], await projection(b, m, w.kvWeight, ctxHidden, s.T));
        const { kvWeight: _, ...norm } = w;
        const { kOut, vOut } = b.fusedNormRopeStacked({ ...norm, kv, positions: b.tensor('i64', [s.T], positions) });
        const k = (await b.read(kOut)) as Float32Array;
        const v = (await b.read(vOut)) as Float32Array;
        expect(layers.map(([l]) => l)).toEqual(Array.from({ length: m.L }, (_, l) => l));
        for (const [l, kl, vl] of layers) {
          expect(bitsOf(kl)).toEqual(bitsOf(new Float32Array(layerOf(k, l, s.T, m))));
          expect(bitsOf(vl)).toEqual(bitsOf(new Float32Array(layerOf(v, l, s.T, m))));
        }
      }),
      run,
    ));
  });

  it('hands writeLayerKv [T, H, D] views of the model dtype, one per layer in order', () => {
    const b = createCpuBackend();
    const m: Model = { L: 3, H: 2, D: 8, R: 8, hidden: 12, dtype: 'bf16', style: 'neox', P: 16, seed: 1 };
    const mat = b.createKvMaterializer(model(b, m));
    const { ctxHidden, positionsTensor } = tokens(b, m, 5, 2);
    const seen: unknown[] = [];
    mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: (layer, k, v) => seen.push([layer, k.shape, v.shape, k.dtype, k.disposed]) });
    expect(seen).toEqual([0, 1, 2].map((l) => [l, [5, 2, 8], [5, 2, 8], 'bf16', false]));
  });

  it('with ropeBase matches the element-wise reference, with and without maxPositionHint, as the table grows', async () => {
    for (const [dtype, style, hint] of [
      ['f32', 'neox', undefined],
      ['bf16', 'gptj', 100],
      ['f16', 'neox', 5000],
    ] as const) {
      const b = createCpuBackend();
      const m: Model = { L: 2, H: 2, D: 80, R: 40, hidden: 24, dtype, style, P: 1, seed: 11 };
      const { cosSinCache: _, ...w } = model(b, m);
      const mat = b.createKvMaterializer({ ...w, ropeBase: 1e6, ...(hint === undefined ? {} : { maxPositionHint: hint }) });
      for (const [T, maxPosition] of [
        [3, 10],
        [4, 3000],
        [2, 70000],
      ] as const) {
        const { ctxHidden, positions, positionsTensor } = tokens(b, m, T, T * 7 + maxPosition, maxPosition);
        const layers = await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b);
        const kvValues = (await b.read(b.tensor(dtype, [T, m.L, 2 * m.H * m.D], await projection(b, m, w.kvWeight, ctxHidden, T)))) as Float32Array;
        // The formula restated on purpose: an oracle apart from the backend layer's ropeFrequencies.
        const angle = (p: number, j: number) => p * 1e6 ** ((-2 * j) / m.R);
        const ref = referenceNormRope({
          ...m,
          T,
          kv: kvValues,
          weight: (await b.read(w.kNormWeight)) as Float32Array,
          eps: (await b.read(w.eps)) as Float32Array,
          positions,
          cosAt: (p, j) => Math.cos(angle(p, j)),
          sinAt: (p, j) => Math.sin(angle(p, j)),
        });
        for (const [l, k, v] of layers) {
          expectMatches(k, layerOf(ref.k, l, T, m), dtype, `layer ${l} K`);
          expectSameValues(v, layerOf(ref.v, l, T, m), `layer ${l} V`);
        }
      }
    }
  });

  it('eps as one number equals an f32 [L] tensor of it; positions [T, 1] and [1, T] equal [T]', async () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 1, D: 16, R: 8, hidden: 8, dtype: 'f32', style: 'gptj', P: 32, seed: 5 };
    const w = model(b, m);
    const { ctxHidden, positions, positionsTensor } = tokens(b, m, 4, 6);
    // a large eps that f32 cannot hold exactly: the number must be used as the f32 tensor would hold it
    const base = await materialized((cb) => b.createKvMaterializer({ ...w, eps: b.tensor('f32', [2], [0.3, 0.3]) }).materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b);
    const withNumber = b.createKvMaterializer({ ...w, eps: 0.3 });
    const shapes = [
      [4, 1],
      [1, 4],
    ] as number[][];
    for (const shape of shapes) {
      const got = await materialized((cb) => withNumber.materialize({ ctxHidden, positions: b.tensor('i64', shape, positions), writeLayerKv: cb }), b);
      got.forEach(([, k, v], l) => {
        expect(bitsOf(k)).toEqual(bitsOf(base[l]![1]));
        expect(bitsOf(v)).toEqual(bitsOf(base[l]![2]));
      });
    }
  });

  it('T = 0 calls nothing', () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 1, D: 8, R: 8, hidden: 4, dtype: 'f32', style: 'neox', P: 8, seed: 1 };
    const mat = b.createKvMaterializer(model(b, m));
    let calls = 0;
    mat.materialize({ ctxHidden: b.empty('f32', [0, 4]), positions: b.empty('i32', [0]), writeLayerKv: () => {
      calls += 1;
    } });
    expect(calls).toBe(0);
  });

  it('keeps the weights it was given: disposing them afterwards changes nothing', async () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 2, D: 8, R: 4, hidden: 6, dtype: 'bf16', style: 'neox', P: 8, seed: 3 };
    const w = model(b, m);
    const mat = b.createKvMaterializer(w);
    const { ctxHidden, positionsTensor } = tokens(b, m, 3, 4);
    const before = await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b);
    for (const t of [w.kvWeight, w.kNormWeight, w.eps, w.cosSinCache]) t.dispose();
    const after = await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b);
    expect(after).toEqual(before);
  });
});

describe('materialize workspaces', () => {
  it('steady-state calls allocate nothing; a larger T grows the workspaces by doubling', () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 2, D: 16, R: 16, hidden: 8, dtype: 'bf16', style: 'neox', P: 64, seed: 8 };
    const mat = b.createKvMaterializer(model(b, m));
    const inputs = [8, 8, 5, 9, 16, 12, 17, 40, 33, 1].map((T) => tokens(b, m, T, T));
    const pools = { kPool: b.empty('bf16', [2, 40, 2, 16]), vPool: b.empty('bf16', [2, 40, 2, 16]) };
    const slots = inputs.map(({ positions }) => b.tensor('i32', [positions.length], positions.map((_, i) => i)));
    const counts: number[] = [];
    inputs.forEach(({ ctxHidden, positionsTensor }, i) => {
      const before = cpuBackendStats(b).buffersAllocated;
      mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: () => {} });
      mat.materializeInto({ ctxHidden, positions: positionsTensor, slots: slots[i]!, ...pools });
      counts.push(cpuBackendStats(b).buffersAllocated - before);
    });
    // T = 8 sizes the projection, K and V workspaces; 9 doubles them to 16, 17 to 32; 40 needs more than double.
    expect(counts).toEqual([3, 0, 0, 3, 0, 0, 3, 3, 0, 0]);
  });

  it('with ropeBase the cos/sin table grows only when a position passes it, by doubling', () => {
    const b = createCpuBackend();
    const m: Model = { L: 1, H: 1, D: 8, R: 8, hidden: 4, dtype: 'f32', style: 'neox', P: 1, seed: 2 };
    const { cosSinCache: _, ...w } = model(b, m);
    const mat = b.createKvMaterializer({ ...w, ropeBase: 10000, maxPositionHint: 100 });
    const grown: number[] = [];
    const ctxHidden = b.tensor('f32', [1, 4], [1, 2, 3, 4]);
    for (const p of [0, 100, 50, 101, 150, 201, 202]) {
      const positions = b.tensor('i32', [1], [p]);
      const before = cpuBackendStats(b).buffersAllocated;
      mat.materialize({ ctxHidden, positions, writeLayerKv: () => {} });
      grown.push(cpuBackendStats(b).buffersAllocated - before);
    }
    // the first call also sizes the three workspaces; rows: 101, then 202, then 404
    expect(grown).toEqual([3, 0, 0, 1, 0, 0, 1]);
  });
});

describe('layer views', () => {
  it('are unusable after writeLayerKv returns: KV027 naming the layer', async () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 2, D: 8, R: 8, hidden: 4, dtype: 'f32', style: 'neox', P: 8, seed: 4 };
    const w = model(b, m);
    const mat = b.createKvMaterializer(w);
    const { ctxHidden, positionsTensor } = tokens(b, m, 3, 1);
    const kept: Tensor<FloatDType>[] = [];
    const copies: Promise<unknown>[] = [];
    mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: (_layer, k, v) => {
      kept.push(k, v);
      copies.push(b.read(k));
    } });
    for (const t of kept) expect(t.disposed).toBe(true);
    await Promise.all(copies);
    const err = await b.read(kept[2]!).catch((e: { code: string; message: string }) => e);
    expect(err).toMatchObject({ code: 'KV027' });
    expect((err as { message: string }).message).toContain('layer 1');
    const q = b.tensor(m.dtype, [3, 2, 8], new Array(48).fill(1));
    const pool = () => b.empty(m.dtype, [8, 2, 8]);
    const use = () => b.ropePoolFused({ q, k: kept[0]!, v: kept[1]!, positions: positionsTensor, slots: positionsTensor, kPool: pool(), vPool: pool(), headDim: 8, numQoHeads: 2, numKvHeads: 2, ropeBase: 10000 });
    expect(thrown(use).code).toBe('KV027');
  });

  it('a throwing callback stops the call, its views are disposed, and the next call works', async () => {
    const b = createCpuBackend();
    const m: Model = { L: 3, H: 1, D: 8, R: 8, hidden: 4, dtype: 'f32', style: 'neox', P: 8, seed: 4 };
    const mat = b.createKvMaterializer(model(b, m));
    const { ctxHidden, positionsTensor } = tokens(b, m, 2, 1);
    let view: Tensor | undefined;
    expect(() =>
      mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: (layer, k) => {
        view = k;
        if (layer === 1) throw new Error('caller bug');
      } }),
    ).toThrow('caller bug');
    expect(view!.disposed).toBe(true);
    expect(await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b)).toHaveLength(3);
  });

  it('a nested call inside writeLayerKv does not overwrite the views being handed out', async () => {
    const b = createCpuBackend();
    const m: Model = { L: 2, H: 2, D: 8, R: 8, hidden: 6, dtype: 'bf16', style: 'gptj', P: 8, seed: 6 };
    const mat = b.createKvMaterializer(model(b, m));
    const outer = tokens(b, m, 3, 1);
    const inner = tokens(b, m, 3, 2);
    const alone = await materialized((cb) => mat.materialize({ ctxHidden: outer.ctxHidden, positions: outer.positionsTensor, writeLayerKv: cb }), b);
    const nested = await materialized(
      (cb) =>
        mat.materialize({ ctxHidden: outer.ctxHidden, positions: outer.positionsTensor, writeLayerKv: (layer, k, v) => {
          mat.materialize({ ctxHidden: inner.ctxHidden, positions: inner.positionsTensor, writeLayerKv: () => {} });
          cb(layer, k, v);
        } }),
      b,
    );
    expect(nested).toEqual(alone);
  });
});

describe('materializeInto', () => {
  it('equals materialize followed by a scatter at the slots, negative slots skipped', async () => {
    const b = createCpuBackend();
    await forEverySeed(40, (run) => fc.assert(
      fc.asyncProperty(
        fc.record({ T: fc.integer({ min: 1, max: 6 }), extra: fc.integer({ min: 0, max: 4 }), seed: fc.integer({ min: 0, max: 2 ** 30 }) }),
        fc.constantFrom('f32', 'f16', 'bf16' as const),
        async ({ T, extra, seed }, dtype) => {
          const m: Model = { L: 2, H: 2, D: 8, R: 4, hidden: 10, dtype, style: seed % 2 ? 'neox' : 'gptj', P: 16, seed };
          const S = T + extra;
          const next = rng(seed);
          const free = Array.from({ length: S }, (_, i) => i).sort(() => next() - 0.5);
          const slots = Array.from({ length: T }, (_, t) => (next() < 0.3 ? -1 : free[t]!));
          const mat = b.createKvMaterializer(model(b, m));
          const { ctxHidden, positionsTensor } = tokens(b, m, T, seed + 1);
          const row = m.H * m.D;
          const initialK = randn(next, m.L * S * row);
          const initialV = randn(next, m.L * S * row);
          const kPool = b.tensor(dtype, [m.L, S, m.H, m.D], initialK);
          const vPool = b.tensor(dtype, [m.L, S, m.H, m.D], initialV);
          const wantK = Array.from((await b.read(kPool)) as Float32Array);
          const wantV = Array.from((await b.read(vPool)) as Float32Array);
          for (const [l, k, v] of await materialized((cb) => mat.materialize({ ctxHidden, positions: positionsTensor, writeLayerKv: cb }), b)) {
            slots.forEach((slot, t) => {
              if (slot < 0) return;
              for (let i = 0; i < row; i++) {
                wantK[(l * S + slot) * row + i] = k[t * row + i]!;
                wantV[(l * S + slot) * row + i] = v[t * row + i]!;
              }
            });
          }
          mat.materializeInto({ ctxHidden, positions: positionsTensor, kPool, vPool, slots: b.tensor('i64', [T], slots) });
          expectSameValues((await b.read(kPool)) as Float32Array, wantK, 'kPool');
          expectSameValues((await b.read(vPool)) as Float32Array, wantV, 'vPool');
        },
      ),
      run,
    ));
  });
});

describe('materializer bad input', () => {
  const m: Model = { L: 2, H: 1, D: 8, R: 8, hidden: 4, dtype: 'f32', style: 'neox', P: 8, seed: 9 };

  it('a position >= P throws KV017 before any callback', () => {
    const b = createCpuBackend();
    const mat = b.createKvMaterializer(model(b, m));
    let calls = 0;
    const err = thrown(() =>
      mat.materialize({ ctxHidden: b.tensor('f32', [2, 4], [1, 2, 3, 4, 5, 6, 7, 8]), positions: b.tensor('i32', [2], [3, 8]), writeLayerKv: () => {
        calls += 1;
      } }),
    );
    expect(err.code).toBe('KV017');
    expect(calls).toBe(0);
  });

  it('materializeInto with a bad position (KV017) or slot (KV038) writes nothing', async () => {
    const b = createCpuBackend();
    const mat = b.createKvMaterializer(model(b, m));
    const pool = () => b.tensor('f32', [2, 4, 1, 8], randn(rng(1), 64));
    const kPool = pool();
    const vPool = pool();
    const before = [await b.read(kPool), await b.read(vPool)];
    const ctxHidden = b.tensor('f32', [2, 4], [1, 2, 3, 4, 5, 6, 7, 8]);
    const call = (positions: number[], slots: number[]) => () => mat.materializeInto({ ctxHidden, positions: b.tensor('i32', [2], positions), kPool, vPool, slots: b.tensor('i32', [2], slots) });
    expect(thrown(call([0, 9], [0, 1])).code).toBe('KV017');
    expect(thrown(call([0, -2], [0, 1])).code).toBe('KV017');
    expect(thrown(call([0, 1], [0, 4])).code).toBe('KV038');
    expect([await b.read(kPool), await b.read(vPool)]).toEqual(before);
  });

  it('with ropeBase a negative position is KV017, and positions past the bounded table are still right', async () => {
    const b = createCpuBackend();
    const { cosSinCache: _, ...w } = model(b, m);
    const mat = b.createKvMaterializer({ ...w, ropeBase: 10000 });
    const ctxHidden = b.tensor('f32', [3, 4], randn(rng(3), 12));
    expect(thrown(() => mat.materialize({ ctxHidden, positions: b.tensor('i32', [3], [0, -1, 0]), writeLayerKv: () => {} })).code).toBe('KV017');
    // 2^19 rows of R = 8 is where the table stops growing; 2^31 - 1 is the largest position a materializer takes.
    const positions = [2 ** 19, 2 ** 31 - 1, 3];
    const layers = await materialized((cb) => mat.materialize({ ctxHidden, positions: b.tensor('i64', [3], positions), writeLayerKv: cb }), b);
    // The formula restated on purpose: an oracle apart from the backend layer's ropeFrequencies.
    const angle = (p: number, j: number) => p * 10000 ** ((-2 * j) / m.R);
    const ref = referenceNormRope({
      ...m,
      T: 3,
      kv: (await b.read(b.tensor('f32', [3, m.L, 2 * m.H * m.D], await projection(b, m, w.kvWeight, ctxHidden, 3)))) as Float32Array,
      weight: (await b.read(w.kNormWeight)) as Float32Array,
      eps: (await b.read(w.eps)) as Float32Array,
      positions,
      cosAt: (p, j) => Math.cos(angle(p, j)),
      sinAt: (p, j) => Math.sin(angle(p, j)),
    });
    expect(layers).toHaveLength(m.L);
    for (const [l, k] of layers) expectMatches(k, layerOf(ref.k, l, 3, m), 'f32', `layer ${l} K`);
  });

  it('positions at or past 2^31 are KV028 (cache or ropeBase), naming the first bad token; nothing is written', async () => {
    const b = createCpuBackend();
    const { cosSinCache: _, ...w } = model(b, m);
    const mat = b.createKvMaterializer({ ...w, ropeBase: 10000 });
    const kPool = b.tensor('f32', [2, 4, 1, 8], randn(rng(5), 64));
    const vPool = b.tensor('f32', [2, 4, 1, 8], randn(rng(6), 64));
    const before = [await b.read(kPool), await b.read(vPool)];
    const ctxHidden = b.tensor('f32', [3, 4], randn(rng(7), 12));
    let calls = 0;
    const err = thrown(() => mat.materialize({ ctxHidden, positions: b.tensor('i64', [3], [7n, 2n ** 31n, 2n ** 40n]), writeLayerKv: () => (calls += 1) }));
    expect(err.code).toBe('KV028');
    expect(err.message).toContain('positions[1] = 2147483648');
    expect(calls).toBe(0);
    const into = (positions: bigint[]) => () =>
      mat.materializeInto({ ctxHidden, positions: b.tensor('i64', [3], positions), kPool, vPool, slots: b.tensor('i32', [3], [0, 1, 2]) });
    expect(thrown(into([2n ** 63n - 1n, 0n, 1n])).code).toBe('KV028');
    // The first bad token decides, and its value the code: a negative one is KV017.
    const negative = thrown(into([5n, -1n, 2n ** 35n]));
    expect([negative.code, negative.message]).toEqual(['KV017', expect.stringContaining('positions[1] = -1')]);
    expect(thrown(into([5n, 2n ** 35n, -1n])).message).toContain('positions[1] = 34359738368');
    expect([await b.read(kPool), await b.read(vPool)]).toEqual(before);
  });

  it('after dispose (its own or the backend’s) calls throw KV003', () => {
    const b = createCpuBackend();
    const mat = b.createKvMaterializer(model(b, m));
    const ctxHidden = b.tensor('f32', [1, 4], [1, 2, 3, 4]);
    const positions = b.tensor('i32', [1], [0]);
    mat.dispose();
    const err = thrown(() => mat.materialize({ ctxHidden, positions, writeLayerKv: () => {} }));
    expect(err.code).toBe('KV003');
    expect(err.message).toContain('KvMaterializer');
    const other = b.createKvMaterializer(model(b, m));
    const kPool = b.empty('f32', [2, 1, 1, 8]);
    const vPool = b.empty('f32', [2, 1, 1, 8]);
    b.dispose();
    expect(thrown(() => other.materializeInto({ ctxHidden, positions, kPool, vPool, slots: positions })).code).toBe('KV003');
  });
});
