import { numel } from '@kvkit/contracts';
import type { Backend, DType, FloatDType, IndexDType, PoolDType, Tensor } from '@kvkit/contracts';
import { buildCosSinCache, epsPerLayer, patternValues, randomPositive, randomValues, Rng } from './data.js';
import { Scope, untyped } from './tensors.js';
import type { UntypedMaterializer } from './tensors.js';

/**
 * A complete set of valid arguments for every op, on one backend, with
 * every caller-owned output and pool filled with a pattern. A validation
 * case changes one thing and expects one code; the runner then checks that
 * no watched tensor changed.
 */

/** The fixture's dims: small, and all different where they can be, so a message naming a dim is unambiguous. */
export const FIXTURE = { T: 4, L: 2, H: 2, D: 8, R: 4, P: 10, N: 4, Hq: 4, S: 6, hidden: 12, C: 14, Dq: 6 } as const;

const { T, L, H, D, R, P, N, Hq, S, hidden, C, Dq } = FIXTURE;

/** Dims a message names once each op's checks have bound them. */
export const BOUND = {
  fusedParams: { H, D, R },
  fused: { H, D, R, T, L },
  fusedAll: { H, D, R, T, L, P },
  ropeParams: { H, Hq, D, R },
  rope: { H, Hq, D, R, N },
  ropeAll: { H, Hq, D, R, N, S },
  createParams: { H, D, R },
  create: { H, D, R, L, hidden },
  materializer: { H, D, R, L, hidden, P },
  materialize: { H, D, R, L, hidden, P, T },
  materializeInto: { H, D, R, L, hidden, P, T, S },
  attentionParams: { H, Hq, D },
  attention: { H, Hq, D, N, S, B1: 3, C: 6 },
  copy: { H, D, S, dstS: S, M: 4 },
  mlaParams: { C, R },
  mla: { C, R, Hq, N, Dq, S },
} as const;

/** Valid index values: positions inside the cache, slots inside the pools (some skipped). */
export const VALID = {
  positions: [3, 0, 9, 5],
  ropePositions: [7, 0, 123, 2],
  slots: [4, -1, 0, 5],
  positions4: [1, 9, 0, 4],
  slots4: [5, 0, -1, 2],
  qIndptr: [0, 1, 4],
  kvIndptr: [0, 2, 6],
  kvSlots: [5, 0, 1, 2, 3, 4],
  fromSlots: [0, 1, 2, 3],
  toSlots: [5, -1, 2, 0],
} as const;

export class Fixture {
  readonly s: Scope;
  private readonly foreignScope: Scope;
  private readonly rng = new Rng(0x5eed);

  readonly kv: Tensor;
  readonly kNormWeight: Tensor;
  readonly eps: Tensor;
  readonly cosSinCache: Tensor;
  readonly positions: Tensor;
  readonly kOut: Tensor;
  readonly vOut: Tensor;

  readonly q: Tensor;
  readonly k: Tensor;
  readonly v: Tensor;
  readonly ropePositions: Tensor;
  readonly slots: Tensor;
  readonly kPool: Tensor;
  readonly vPool: Tensor;
  /** Rows `[N, H, D]` that dequantizeKv reads kPool's slots into. */
  readonly poolRows: Tensor;

  readonly kvWeight: Tensor;
  readonly ctxHidden: Tensor;
  readonly positions4: Tensor;
  readonly kPool4: Tensor;
  readonly vPool4: Tensor;
  readonly slots4: Tensor;
  /** pagedAttention over kPool/vPool: two requests (1 query over 2 cached tokens, 3 over 4), into `attentionOut`. */
  readonly qIndptr: Tensor;
  readonly kvIndptr: Tensor;
  readonly kvSlots: Tensor;
  readonly attentionOut: Tensor;
  /** copySlots from kPool/vPool into these. */
  readonly kCopy: Tensor;
  readonly vCopy: Tensor;
  readonly fromSlots: Tensor;
  readonly toSlots: Tensor;
  /** mlaPoolFused: the latent [N, C + R], its norm weight, queries [N, Hq, Dq] and a one-head pool [S, 1, C + R]. */
  readonly kvLatent: Tensor;
  readonly kvNormWeight: Tensor;
  readonly mlaQ: Tensor;
  readonly mlaPool: Tensor;
  /** Built from cosSinCache: positions are checked against P. */
  readonly materializer: UntypedMaterializer;
  /** Built from ropeBase: no P, so only negative positions are out of range. */
  readonly baseMaterializer: UntypedMaterializer;

  constructor(
    readonly backend: Backend,
    readonly other: Backend,
  ) {
    this.s = new Scope(backend);
    this.foreignScope = new Scope(other);
    const f = (shape: readonly number[], fill?: Float32Array) => this.float('f32', shape, fill);
    this.kv = f([T, L, 2 * H * D]);
    this.kNormWeight = f([L, D], randomPositive(this.rng, L * D));
    this.eps = f([L], epsPerLayer(L));
    this.cosSinCache = f([P, R], Float32Array.from(buildCosSinCache(P, R, 10000)));
    this.positions = this.s.index('i32', [T], VALID.positions);
    this.kOut = f([L, T, H, D], patternValues(L * T * H * D));
    this.vOut = f([L, T, H, D], patternValues(L * T * H * D, 1));

    this.q = f([N, Hq, D]);
    this.k = f([N, H, D]);
    this.v = f([N, H, D]);
    this.ropePositions = this.s.index('i64', [N], VALID.ropePositions);
    this.slots = this.s.index('i32', [N], VALID.slots);
    this.kPool = f([S, H, D], patternValues(S * H * D, 2));
    this.vPool = f([S, H, D], patternValues(S * H * D, 3));
    this.poolRows = f([N, H, D]);

    this.kvWeight = f([L, 2 * H * D, hidden]);
    this.ctxHidden = f([T, hidden]);
    this.positions4 = this.s.index('i64', [T], VALID.positions4);
    this.kPool4 = f([L, S, H, D], patternValues(L * S * H * D, 4));
    this.vPool4 = f([L, S, H, D], patternValues(L * S * H * D, 5));
    this.slots4 = this.s.index('i64', [T], VALID.slots4);
    this.qIndptr = this.s.index('i32', [3], VALID.qIndptr);
    this.kvIndptr = this.s.index('i32', [3], VALID.kvIndptr);
    this.kvSlots = this.s.index('i32', [VALID.kvSlots.length], VALID.kvSlots);
    this.attentionOut = f([N, Hq, D], patternValues(N * Hq * D, 6));
    this.kCopy = f([S, H, D], patternValues(S * H * D, 7));
    this.vCopy = f([S, H, D], patternValues(S * H * D, 8));
    this.fromSlots = this.s.index('i32', [4], VALID.fromSlots);
    this.toSlots = this.s.index('i64', [4], VALID.toSlots);
    this.kvLatent = f([N, C + R]);
    this.kvNormWeight = f([C], randomPositive(this.rng, C));
    this.mlaQ = f([N, Hq, Dq]);
    this.mlaPool = f([S, 1, C + R], patternValues(S * (C + R), 9));
    this.materializer = this.s.owned(untyped(backend).createKvMaterializer(this.createArgs()));
    this.baseMaterializer = this.s.owned(untyped(backend).createKvMaterializer(this.createArgs({ cosSinCache: undefined, ropeBase: 10000, maxPositionHint: 64 })));
  }

  /** A fresh tensor of random non-zero values (or `fill`), tracked for disposal. */
  float(dtype: PoolDType, shape: readonly number[], fill?: Float32Array): Tensor {
    const n = numel(shape);
    return this.s.float(dtype, shape, fill ?? randomValues(this.rng, n));
  }

  index(dtype: IndexDType, shape: readonly number[], values: readonly number[]): Tensor {
    return this.s.index(dtype, shape, values);
  }

  /** A tensor of any dtype with a valid shape: float data, or small integers for i32/i64. */
  any(dtype: DType, shape: readonly number[]): Tensor {
    const n = numel(shape);
    if (dtype === 'i32' || dtype === 'i64') return this.index(dtype, shape, Array.from({ length: n }, (_, i) => i % 3));
    return this.float(dtype, shape);
  }

  /** A tensor that was disposed before use. */
  disposed(dtype: DType, shape: readonly number[]): Tensor {
    const t = this.any(dtype, shape);
    t.dispose();
    return t;
  }

  /** A tensor made by another instance of the same backend. */
  foreign(dtype: FloatDType, shape: readonly number[]): Tensor {
    const n = numel(shape);
    return this.foreignScope.float(dtype, shape, randomValues(this.rng, n));
  }

  foreignIndex(dtype: IndexDType, shape: readonly number[], values: readonly number[]): Tensor {
    return this.foreignScope.index(dtype, shape, values);
  }

  /** The K view of layer 1 from a materialize call that has returned. */
  staleLayerView(): Tensor {
    let kept: Tensor | undefined;
    this.materializer.materialize({ ctxHidden: this.ctxHidden, positions: this.positions4, writeLayerKv: (layer: number, k: Tensor) => {
      if (layer === 1) kept = k;
    } });
    if (!kept) throw new Error('materialize never called writeLayerKv for layer 1');
    return kept;
  }

  fusedArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      kv: this.kv,
      kNormWeight: this.kNormWeight,
      eps: this.eps,
      cosSinCache: this.cosSinCache,
      positions: this.positions,
      kOut: this.kOut,
      vOut: this.vOut,
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
      ropeStyle: 'neox',
      ...over,
    };
  }

  ropeArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      q: this.q,
      k: this.k,
      v: this.v,
      positions: this.ropePositions,
      slots: this.slots,
      kPool: this.kPool,
      vPool: this.vPool,
      numKvHeads: H,
      numQoHeads: Hq,
      headDim: D,
      rotaryDim: R,
      ropeStyle: 'gptj',
      ropeBase: 10000,
      ...over,
    };
  }

  createArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      kvWeight: this.kvWeight,
      kNormWeight: this.kNormWeight,
      eps: this.eps,
      cosSinCache: this.cosSinCache,
      numKvHeads: H,
      headDim: D,
      rotaryDim: R,
      ropeStyle: 'neox',
      ...over,
    };
  }

  attentionArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      q: this.q,
      kPool: this.kPool,
      vPool: this.vPool,
      qIndptr: this.qIndptr,
      kvIndptr: this.kvIndptr,
      kvSlots: this.kvSlots,
      out: this.attentionOut,
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      ...over,
    };
  }

  mlaArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      kvLatent: this.kvLatent,
      kvNormWeight: this.kvNormWeight,
      eps: 1e-6,
      q: this.mlaQ,
      positions: this.ropePositions,
      slots: this.slots,
      pool: this.mlaPool,
      kvLoraRank: C,
      qkRopeHeadDim: R,
      numQoHeads: Hq,
      ropeBase: 10000,
      ...over,
    };
  }

  copyArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return { kSrc: this.kPool, vSrc: this.vPool, kDst: this.kCopy, vDst: this.vCopy, fromSlots: this.fromSlots, toSlots: this.toSlots, ...over };
  }

  intoArgs(over: Record<string, unknown> = {}): Record<string, unknown> {
    return { ctxHidden: this.ctxHidden, positions: this.positions4, kPool: this.kPool4, vPool: this.vPool4, slots: this.slots4, ...over };
  }

  /** Every caller-owned output and pool: none may change when a call is rejected. Rows are `[H*D]`. */
  watched(): { name: string; tensor: Tensor }[] {
    return [
      { name: 'kOut', tensor: this.kOut },
      { name: 'vOut', tensor: this.vOut },
      { name: 'kPool', tensor: this.kPool },
      { name: 'vPool', tensor: this.vPool },
      { name: 'kPool [L, S, H, D]', tensor: this.kPool4 },
      { name: 'vPool [L, S, H, D]', tensor: this.vPool4 },
      { name: 'attention out', tensor: this.attentionOut },
      { name: 'kCopy', tensor: this.kCopy },
      { name: 'vCopy', tensor: this.vCopy },
      { name: 'mlaPool', tensor: this.mlaPool },
    ];
  }

  dispose(): void {
    this.s.dispose();
    this.foreignScope.dispose();
  }
}
