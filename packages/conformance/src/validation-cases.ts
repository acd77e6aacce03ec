import type { Tensor } from '@kvkit/contracts';
import { BOUND, FIXTURE, VALID } from './fixture.js';
import type { Fixture } from './fixture.js';
import { poolValidationCases } from './poolValidationCases.js';
import { pagedValidationCases } from './pagedValidationCases.js';
import { mlaValidationCases } from './mlaValidationCases.js';
import { mropeMaterializerValidationCases } from './mropeMaterializer.js';
import { mropeQkNormValidationCases } from './mropeQkNorm.js';
import { ropeScalingValidationCases } from './ropeScalingValidation.js';
import { untyped } from './tensors.js';

/**
 * One call per condition the contracts check, each changing one thing in the
 * fixture's valid arguments: every code KV001–KV045, the seed conditions
 * (shared/seeds/00x_*.txt) by name, and the ways garbage reaches a backend.
 */
export interface ValidationCase {
  readonly code: string;
  /** `err.op`: the op as users call it (`KvMaterializer.materialize`, `tensor`, ...). */
  readonly op: string;
  readonly name: string;
  /** The seed page whose condition this is. */
  readonly seed?: string;
  /** The argument the message must name. */
  readonly arg?: string;
  /** Dims the message must list (`H=2 D=8 ...`), as bound when the check failed. */
  readonly dims?: Readonly<Record<string, number>>;
  /** Other text the message must contain (the offending value, the expected shape). */
  readonly mentions?: readonly string[];
  /** The error may come from the returned promise (read()) instead of a synchronous throw. */
  readonly rejects?: boolean;
  /**
   * A value that lives on the device: a backend may throw now or at the next
   * sync; either way the call wrote nothing, the good tokens' rows included.
   */
  readonly deferred?: true;
  readonly call: (fx: Fixture) => unknown;
}

const { T, L, H, D, R, P, N, Hq, S, hidden } = FIXTURE;

const fused = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).fusedNormRopeStacked(fx.fusedArgs(over));
const rope = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).ropePoolFused(fx.ropeArgs(over));
const create = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).createKvMaterializer(fx.createArgs(over));
const into = (fx: Fixture, over: Record<string, unknown>) => fx.materializer.materializeInto(fx.intoArgs(over));
const noop = () => {};

/** An eps tensor of the fixture's layers with `value` at `layer`, the others valid. */
const epsWith = (fx: Fixture, layer: number, value: number) => fx.float('f32', [L], Float32Array.from({ length: L }, (_, l) => (l === layer ? value : 1e-5)));

/** A materializer built with a bad eps tensor, called once: the host refuses it at creation, a device at the call's sync. */
function materializeWithEps(fx: Fixture, eps: Tensor, into: Record<string, unknown> = {}): void {
  const m = create(fx, { eps }) as { materializeInto(args: unknown): void; dispose(): void };
  try {
    m.materializeInto(fx.intoArgs(into));
  } finally {
    m.dispose();
  }
}

export const validationCases: readonly ValidationCase[] = [
  // KV001: not a kvkit tensor (and an arguments value that is not an object).
  { code: 'KV001', op: 'fusedNormRopeStacked', name: 'kv is a plain array', arg: 'kv', dims: BOUND.fusedParams, call: (fx) => fused(fx, { kv: [1, 2, 3] }) },
  { code: 'KV001', op: 'fusedNormRopeStacked', name: 'kv is a look-alike { dtype, shape } object', arg: 'kv', call: (fx) => fused(fx, { kv: { dtype: 'f32', shape: [T, L, 2 * H * D], backend: 'cpu' } }) },
  { code: 'KV001', op: 'ropePoolFused', name: 'slots is an Int32Array', arg: 'slots', dims: BOUND.rope, call: (fx) => rope(fx, { slots: new Int32Array(N) }) },
  { code: 'KV001', op: 'createKvMaterializer', name: 'kvWeight is missing', arg: 'kvWeight', dims: BOUND.createParams, call: (fx) => create(fx, { kvWeight: undefined }) },
  { code: 'KV001', op: 'KvMaterializer.materialize', name: 'ctxHidden is null', arg: 'ctxHidden', call: (fx) => fx.materializer.materialize({ ctxHidden: null, positions: fx.positions4, writeLayerKv: noop }) },
  { code: 'KV001', op: 'KvMaterializer.materializeInto', name: 'kPool is missing', arg: 'kPool', dims: BOUND.materialize, call: (fx) => into(fx, { kPool: undefined }) },
  { code: 'KV001', op: 'tensor', name: 'data is a string', arg: 'data', call: (fx) => fx.backend.tensor('f32', [2], 'ab' as never) },
  { code: 'KV001', op: 'tensor', name: 'data is a DataView', arg: 'data', call: (fx) => fx.backend.tensor('f32', [2], new DataView(new ArrayBuffer(8)) as never) },

  // KV002: a tensor made by another backend instance.
  { code: 'KV002', op: 'fusedNormRopeStacked', name: 'kv from another backend instance', arg: 'kv', dims: BOUND.fusedParams, call: (fx) => fused(fx, { kv: fx.foreign('f32', [T, L, 2 * H * D]) }) },
  { code: 'KV002', op: 'ropePoolFused', name: 'kPool from another backend instance', arg: 'kPool', call: (fx) => rope(fx, { kPool: fx.foreign('f32', [S, H, D]) }) },
  { code: 'KV002', op: 'createKvMaterializer', name: 'kNormWeight from another backend instance', arg: 'kNormWeight', call: (fx) => create(fx, { kNormWeight: fx.foreign('f32', [L, D]) }) },
  { code: 'KV002', op: 'KvMaterializer.materialize', name: 'positions from another backend instance', arg: 'positions', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.foreignIndex('i32', [T], VALID.positions4), writeLayerKv: noop }) },
  { code: 'KV002', op: 'read', name: 'read() of a tensor from another backend instance', rejects: true, call: (fx) => fx.backend.read(fx.foreign('f32', [2])) },

  // KV003: used after dispose.
  { code: 'KV003', op: 'fusedNormRopeStacked', name: 'kNormWeight was disposed', arg: 'kNormWeight', dims: BOUND.fused, call: (fx) => fused(fx, { kNormWeight: fx.disposed('f32', [L, D]) }) },
  { code: 'KV003', op: 'ropePoolFused', name: 'q was disposed', arg: 'q', call: (fx) => rope(fx, { q: fx.disposed('f32', [N, Hq, D]) }) },
  { code: 'KV003', op: 'createKvMaterializer', name: 'eps tensor was disposed', arg: 'eps', call: (fx) => create(fx, { eps: fx.disposed('f32', [L]) }) },
  { code: 'KV003', op: 'KvMaterializer.materializeInto', name: 'slots was disposed', arg: 'slots', call: (fx) => into(fx, { slots: fx.disposed('i64', [T]) }) },
  {
    code: 'KV003',
    op: 'KvMaterializer.materialize',
    name: 'the materializer was disposed',
    arg: 'KvMaterializer',
    call: (fx) => {
      const m = create(fx, {});
      m.dispose();
      m.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: noop });
    },
  },
  { code: 'KV003', op: 'read', name: 'read() of a disposed tensor', rejects: true, call: (fx) => fx.backend.read(fx.disposed('f32', [3])) },

  // KV004: dtype not allowed.
  { code: 'KV004', op: 'fusedNormRopeStacked', name: 'kv is i32', arg: 'kv', mentions: ['i32'], call: (fx) => fused(fx, { kv: fx.any('i32', [T, L, 2 * H * D]) }) },
  { code: 'KV004', op: 'fusedNormRopeStacked', name: 'eps is f16 (f32 only)', arg: 'eps', mentions: ['f16'], call: (fx) => fused(fx, { eps: fx.any('f16', [L]) }) },
  { code: 'KV004', op: 'fusedNormRopeStacked', name: 'positions is f32', arg: 'positions', call: (fx) => fused(fx, { positions: fx.any('f32', [T]) }) },
  { code: 'KV004', op: 'fusedNormRopeStacked', name: 'cosSinCache is i64', arg: 'cosSinCache', call: (fx) => fused(fx, { cosSinCache: fx.any('i64', [P, R]) }) },
  { code: 'KV004', op: 'ropePoolFused', name: 'q is i32', arg: 'q', call: (fx) => rope(fx, { q: fx.any('i32', [N, Hq, D]) }) },
  { code: 'KV004', op: 'ropePoolFused', name: 'slots is bf16', arg: 'slots', call: (fx) => rope(fx, { slots: fx.any('bf16', [N]) }) },
  { code: 'KV004', op: 'createKvMaterializer', name: 'kvWeight is i64', arg: 'kvWeight', call: (fx) => create(fx, { kvWeight: fx.any('i64', [L, 2 * H * D, hidden]) }) },
  { code: 'KV004', op: 'KvMaterializer.materialize', name: 'positions is f16', arg: 'positions', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.any('f16', [T]), writeLayerKv: noop }) },
  { code: 'KV004', op: 'tensor', name: "tensor('f64', ...)", arg: 'dtype', mentions: ['f64'], call: (fx) => fx.backend.tensor('f64' as never, [2], [1, 2]) },
  { code: 'KV004', op: 'empty', name: "empty('float32', ...)", arg: 'dtype', call: (fx) => fx.backend.empty('float32' as never, [2]) },

  // KV005: dtypes that must agree.
  { code: 'KV005', op: 'fusedNormRopeStacked', name: 'kNormWeight f16 with kv bf16 (neither kv dtype nor f32)', arg: 'kNormWeight', mentions: ['f16', 'bf16'], call: (fx) => fused(fx, { kv: fx.any('bf16', [T, L, 2 * H * D]), kNormWeight: fx.any('f16', [L, D]), kOut: undefined, vOut: undefined }) },
  { code: 'KV005', op: 'fusedNormRopeStacked', name: 'kOut f16 with kv f32', arg: 'kOut', call: (fx) => fused(fx, { kOut: fx.any('f16', [L, T, H, D]) }) },
  { code: 'KV005', op: 'ropePoolFused', name: 'k f16 with q f32', arg: 'k', call: (fx) => rope(fx, { k: fx.any('f16', [N, H, D]) }) },
  { code: 'KV005', op: 'ropePoolFused', name: 'vPool bf16 with q f32', arg: 'vPool', call: (fx) => rope(fx, { vPool: fx.any('bf16', [S, H, D]) }) },
  { code: 'KV005', op: 'createKvMaterializer', name: 'kNormWeight bf16 with kvWeight f16', arg: 'kNormWeight', call: (fx) => create(fx, { kvWeight: fx.any('f16', [L, 2 * H * D, hidden]), kNormWeight: fx.any('bf16', [L, D]) }) },
  { code: 'KV005', op: 'KvMaterializer.materialize', name: 'ctxHidden f16 with kvWeight f32', arg: 'ctxHidden', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.any('f16', [T, hidden]), positions: fx.positions4, writeLayerKv: noop }) },
  { code: 'KV005', op: 'KvMaterializer.materializeInto', name: 'vPool f16 with kvWeight f32', arg: 'vPool', call: (fx) => into(fx, { vPool: fx.any('f16', [L, S, H, D]) }) },

  // KV006: not a positive integer.
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'numKvHeads = 0', arg: 'numKvHeads', mentions: ['0'], call: (fx) => fused(fx, { numKvHeads: 0 }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'headDim = -8', arg: 'headDim', mentions: ['-8'], dims: { H }, call: (fx) => fused(fx, { headDim: -8 }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'rotaryDim = 4.5', arg: 'rotaryDim', mentions: ['4.5'], dims: { H, D }, call: (fx) => fused(fx, { rotaryDim: 4.5 }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: "numKvHeads = '2' (a string)", arg: 'numKvHeads', call: (fx) => fused(fx, { numKvHeads: '2' }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'headDim = NaN', arg: 'headDim', call: (fx) => fused(fx, { headDim: Number.NaN }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'rotaryDim missing (required here)', arg: 'rotaryDim', call: (fx) => fused(fx, { rotaryDim: undefined }) },
  { code: 'KV006', op: 'fusedNormRopeStacked', name: 'numKvHeads = 2^53 (not a safe integer)', arg: 'numKvHeads', call: (fx) => fused(fx, { numKvHeads: 2 ** 53 }) },
  { code: 'KV006', op: 'ropePoolFused', name: 'numQoHeads = 0', arg: 'numQoHeads', dims: { H }, call: (fx) => rope(fx, { numQoHeads: 0 }) },
  { code: 'KV006', op: 'ropePoolFused', name: 'headDim = Infinity', arg: 'headDim', call: (fx) => rope(fx, { headDim: Number.POSITIVE_INFINITY }) },
  { code: 'KV006', op: 'createKvMaterializer', name: 'maxPositionHint = 0', arg: 'maxPositionHint', dims: BOUND.create, call: (fx) => create(fx, { cosSinCache: undefined, ropeBase: 10000, maxPositionHint: 0 }) },
  { code: 'KV006', op: 'createKvMaterializer', name: 'maxPositionHint = 1.5', arg: 'maxPositionHint', call: (fx) => create(fx, { cosSinCache: undefined, ropeBase: 10000, maxPositionHint: 1.5 }) },
  { code: 'KV006', op: 'createKvMaterializer', name: 'rotaryDim = -2', arg: 'rotaryDim', call: (fx) => create(fx, { rotaryDim: -2 }) },

  // KV007: rotaryDim odd or above headDim.
  { code: 'KV007', op: 'fusedNormRopeStacked', name: 'rotaryDim = 5 (odd)', arg: 'rotaryDim', mentions: ['rotaryDim=5', 'headDim=8'], dims: { H, D }, call: (fx) => fused(fx, { rotaryDim: 5 }) },
  { code: 'KV007', op: 'fusedNormRopeStacked', name: 'rotaryDim = 10 > headDim = 8', mentions: ['rotaryDim=10'], call: (fx) => fused(fx, { rotaryDim: 10 }) },
  { code: 'KV007', op: 'ropePoolFused', name: 'rotaryDim = 12 > headDim = 8', mentions: ['rotaryDim=12'], call: (fx) => rope(fx, { rotaryDim: 12 }) },
  { code: 'KV007', op: 'createKvMaterializer', name: 'rotaryDim = 3', mentions: ['rotaryDim=3'], call: (fx) => create(fx, { rotaryDim: 3 }) },

  // KV008: number out of range.
  { code: 'KV008', op: 'ropePoolFused', name: 'ropeBase = 0', arg: 'ropeBase', mentions: ['> 0'], dims: BOUND.ropeParams, call: (fx) => rope(fx, { ropeBase: 0 }) },
  { code: 'KV008', op: 'ropePoolFused', name: 'ropeBase = -10000', arg: 'ropeBase', call: (fx) => rope(fx, { ropeBase: -10000 }) },
  { code: 'KV008', op: 'ropePoolFused', name: 'ropeBase = NaN', arg: 'ropeBase', call: (fx) => rope(fx, { ropeBase: Number.NaN }) },
  { code: 'KV008', op: 'ropePoolFused', name: 'ropeBase = Infinity', arg: 'ropeBase', call: (fx) => rope(fx, { ropeBase: Number.POSITIVE_INFINITY }) },
  { code: 'KV008', op: 'ropePoolFused', name: "ropeBase = '10000' (a string)", arg: 'ropeBase', call: (fx) => rope(fx, { ropeBase: '10000' }) },
  { code: 'KV008', op: 'createKvMaterializer', name: 'ropeBase = 0', arg: 'ropeBase', call: (fx) => create(fx, { cosSinCache: undefined, ropeBase: 0 }) },
  { code: 'KV008', op: 'createKvMaterializer', name: 'eps = -1e-6 (a number below 0)', arg: 'eps', mentions: ['>= 0'], dims: BOUND.create, call: (fx) => create(fx, { eps: -1e-6 }) },
  { code: 'KV008', op: 'createKvMaterializer', name: 'eps = NaN', arg: 'eps', call: (fx) => create(fx, { eps: Number.NaN }) },
  { code: 'KV008', op: 'createKvMaterializer', name: 'eps = 1e39 (finite in f64, Infinity as the f32 kernels take it)', arg: 'eps', call: (fx) => create(fx, { eps: 1e39 }) },

  // KV009: unknown option value.
  { code: 'KV009', op: 'fusedNormRopeStacked', name: "ropeStyle = 'llama'", arg: 'ropeStyle', mentions: ['neox', 'gptj', 'llama'], dims: BOUND.fusedParams, call: (fx) => fused(fx, { ropeStyle: 'llama' }) },
  { code: 'KV009', op: 'ropePoolFused', name: "ropeStyle = 'NEOX' (case matters)", arg: 'ropeStyle', call: (fx) => rope(fx, { ropeStyle: 'NEOX' }) },
  { code: 'KV009', op: 'createKvMaterializer', name: 'ropeStyle = 1', arg: 'ropeStyle', call: (fx) => create(fx, { ropeStyle: 1 }) },

  // KV010 (seed 003): kv not 3-D.
  { code: 'KV010', op: 'fusedNormRopeStacked', seed: '003', name: 'kv is 2-D [T, 2*H*D] (one layer)', arg: 'kv', mentions: ['3-D', `[${T}, ${2 * H * D}]`], dims: BOUND.fusedParams, call: (fx) => fused(fx, { kv: fx.any('f32', [T, 2 * H * D]) }) },
  { code: 'KV010', op: 'fusedNormRopeStacked', seed: '003', name: 'kv is 4-D [T, L, 2, H*D]', arg: 'kv', call: (fx) => fused(fx, { kv: fx.any('f32', [T, L, 2, H * D]) }) },

  // KV011: kv's last dim.
  { code: 'KV011', op: 'fusedNormRopeStacked', name: 'kv is [T, L, 2*H*D + 1]', arg: 'kv', mentions: [`${2 * H * D}`], dims: BOUND.fused, call: (fx) => fused(fx, { kv: fx.any('f32', [T, L, 2 * H * D + 1]) }) },
  { code: 'KV011', op: 'fusedNormRopeStacked', name: 'kv holds K only, [T, L, H*D]', arg: 'kv', call: (fx) => fused(fx, { kv: fx.any('f32', [T, L, H * D]) }) },

  // KV012: kNormWeight not [L, D].
  { code: 'KV012', op: 'fusedNormRopeStacked', name: 'kNormWeight is [L, D + 1]', arg: 'kNormWeight', mentions: [`[${L}, ${D + 1}]`], dims: BOUND.fused, call: (fx) => fused(fx, { kNormWeight: fx.any('f32', [L, D + 1]) }) },
  { code: 'KV012', op: 'fusedNormRopeStacked', name: 'kNormWeight is [D] (one layer)', arg: 'kNormWeight', call: (fx) => fused(fx, { kNormWeight: fx.any('f32', [D]) }) },
  { code: 'KV012', op: 'createKvMaterializer', name: 'kNormWeight is [L + 1, D]', arg: 'kNormWeight', dims: BOUND.create, call: (fx) => create(fx, { kNormWeight: fx.any('f32', [L + 1, D]) }) },

  // KV013 (seed 004): eps not [L].
  { code: 'KV013', op: 'fusedNormRopeStacked', seed: '004', name: 'eps is [L + 1]', arg: 'eps', mentions: [`[${L + 1}]`], dims: BOUND.fused, call: (fx) => fused(fx, { eps: fx.any('f32', [L + 1]) }) },
  { code: 'KV013', op: 'fusedNormRopeStacked', seed: '004', name: 'eps is a 0-D tensor (one eps for all layers)', arg: 'eps', call: (fx) => fused(fx, { eps: fx.any('f32', []) }) },
  { code: 'KV013', op: 'createKvMaterializer', seed: '004', name: 'eps is [L, 1]', arg: 'eps', dims: BOUND.create, call: (fx) => create(fx, { eps: fx.any('f32', [L, 1]) }) },

  // KV014 (seed 002): caller's output not [L, T, H, D].
  { code: 'KV014', op: 'fusedNormRopeStacked', seed: '002', name: 'kOut is [T, L, H, D] (axes swapped)', arg: 'kOut', mentions: [`[${T}, ${L}, ${H}, ${D}]`], dims: BOUND.fusedAll, call: (fx) => fused(fx, { kOut: fx.any('f32', [T, L, H, D]) }) },
  { code: 'KV014', op: 'fusedNormRopeStacked', seed: '002', name: 'vOut is [L, T + 1, H, D]', arg: 'vOut', call: (fx) => fused(fx, { vOut: fx.any('f32', [L, T + 1, H, D]) }) },
  { code: 'KV014', op: 'fusedNormRopeStacked', seed: '002', name: 'kOut is [L, T, H*D]', arg: 'kOut', call: (fx) => fused(fx, { kOut: fx.any('f32', [L, T, H * D]) }) },

  // KV015: positions not [T].
  { code: 'KV015', op: 'fusedNormRopeStacked', name: 'positions is [T + 1]', arg: 'positions', mentions: [`[${T + 1}]`], dims: BOUND.fusedAll, call: (fx) => fused(fx, { positions: fx.index('i32', [T + 1], [0, 1, 2, 3, 4]) }) },
  { code: 'KV015', op: 'fusedNormRopeStacked', name: 'positions is [T, 1] (only the materializer flattens)', arg: 'positions', call: (fx) => fused(fx, { positions: fx.index('i64', [T, 1], [0, 1, 2, 3]) }) },

  // KV016: cosSinCache not [P, R].
  { code: 'KV016', op: 'fusedNormRopeStacked', name: 'cosSinCache is [P, headDim] while rotaryDim < headDim', arg: 'cosSinCache', mentions: [`[${P}, ${D}]`], dims: BOUND.fused, call: (fx) => fused(fx, { cosSinCache: fx.any('f32', [P, D]) }) },
  { code: 'KV016', op: 'fusedNormRopeStacked', name: 'cosSinCache is [P, R/2] (cos only)', arg: 'cosSinCache', call: (fx) => fused(fx, { cosSinCache: fx.any('f32', [P, R / 2]) }) },
  { code: 'KV016', op: 'createKvMaterializer', name: 'cosSinCache is [P, R + 2]', arg: 'cosSinCache', call: (fx) => create(fx, { cosSinCache: fx.any('f32', [P, R + 2]) }) },

  // KV017: a position outside the cache (device-side value).
  {
    code: 'KV017',
    op: 'fusedNormRopeStacked',
    name: 'positions[2] = P, the other tokens fine',
    arg: 'positions',
    mentions: [`positions[2] = ${P}`],
    dims: BOUND.fusedAll,
    deferred: true,
    call: (fx) => fused(fx, { positions: fx.index('i32', [T], [1, 2, P, 3]) }),
  },
  {
    code: 'KV017',
    op: 'fusedNormRopeStacked',
    name: 'every position negative (i64)',
    arg: 'positions',
    mentions: ['positions[0] = -1'],
    deferred: true,
    call: (fx) => fused(fx, { positions: fx.index('i64', [T], [-1, -5, -(2 ** 40), -2]) }),
  },
  {
    code: 'KV017',
    op: 'KvMaterializer.materialize',
    name: 'positions[3] = P + 7 with a cosSinCache',
    arg: 'positions',
    mentions: [`positions[3] = ${P + 7}`],
    dims: BOUND.materialize,
    deferred: true,
    call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i32', [T], [0, 1, 2, P + 7]), writeLayerKv: noop }),
  },
  {
    code: 'KV017',
    op: 'KvMaterializer.materialize',
    name: 'a negative position with ropeBase (the cache grows, but not below 0)',
    arg: 'positions',
    mentions: ['positions[1] = -3'],
    deferred: true,
    call: (fx) => fx.baseMaterializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i64', [T, 1], [4, -3, 2, 1]), writeLayerKv: noop }),
  },
  {
    code: 'KV017',
    op: 'KvMaterializer.materializeInto',
    name: 'positions[1] = P (i64), slots fine',
    arg: 'positions',
    mentions: [`positions[1] = ${P}`],
    dims: BOUND.materializeInto,
    deferred: true,
    call: (fx) => into(fx, { positions: fx.index('i64', [T], [0, P, 1, 2]) }),
  },

  // KV028: a position at or past 2^31, the bound of every materializer (device-side value).
  {
    code: 'KV028',
    op: 'KvMaterializer.materialize',
    name: 'positions[2] = 2^31 with ropeBase (i64)',
    arg: 'positions',
    mentions: [`positions[2] = ${2 ** 31}`],
    deferred: true,
    call: (fx) => fx.baseMaterializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i64', [T], [0, 1, 2 ** 31, 3]), writeLayerKv: noop }),
  },
  {
    code: 'KV028',
    op: 'KvMaterializer.materializeInto',
    name: 'positions[1] = 2^40 with ropeBase, slots fine',
    arg: 'positions',
    mentions: [`positions[1] = ${2 ** 40}`, `${2 ** 31}`],
    deferred: true,
    call: (fx) => fx.baseMaterializer.materializeInto(fx.intoArgs({ positions: fx.index('i64', [T], [0, 2 ** 40, 1, 2]) })),
  },

  // KV019: a float parameter tensor (eps) that is not finite and >= 0 (device-side value where eps lives there).
  {
    code: 'KV019',
    op: 'fusedNormRopeStacked',
    name: 'eps[1] = NaN, layer 0 fine',
    arg: 'eps',
    mentions: ['eps[1] = NaN', 'finite and >= 0'],
    dims: BOUND.fusedAll,
    deferred: true,
    call: (fx) => fused(fx, { eps: epsWith(fx, 1, Number.NaN) }),
  },
  {
    code: 'KV019',
    op: 'fusedNormRopeStacked',
    name: 'eps[0] negative',
    arg: 'eps',
    mentions: ['eps[0] = -0.5'],
    deferred: true,
    call: (fx) => fused(fx, { eps: epsWith(fx, 0, -0.5) }),
  },
  {
    code: 'KV019',
    op: 'fusedNormRopeStacked',
    name: 'eps[1] = +Inf',
    arg: 'eps',
    mentions: ['eps[1] = Infinity'],
    deferred: true,
    call: (fx) => fused(fx, { eps: epsWith(fx, 1, Number.POSITIVE_INFINITY) }),
  },
  {
    code: 'KV019',
    op: 'createKvMaterializer',
    name: 'an eps tensor with eps[1] = NaN, then materializeInto',
    arg: 'eps',
    mentions: ['eps[1] = NaN'],
    deferred: true,
    call: (fx) => materializeWithEps(fx, epsWith(fx, 1, Number.NaN)),
  },
  {
    code: 'KV019',
    op: 'createKvMaterializer',
    name: 'an eps tensor with eps[0] = -Inf, then materializeInto',
    arg: 'eps',
    mentions: ['eps[0] = -Infinity'],
    deferred: true,
    call: (fx) => materializeWithEps(fx, epsWith(fx, 0, Number.NEGATIVE_INFINITY)),
  },
  {
    code: 'KV019',
    op: 'createKvMaterializer',
    name: 'an eps tensor with eps[1] = NaN, then materializeInto with every slot skipped (the rule holds whether a token writes or not)',
    arg: 'eps',
    mentions: ['eps[1] = NaN'],
    // Every token skipped: no row of any layer may be written.
    deferred: true,
    call: (fx) => materializeWithEps(fx, epsWith(fx, 1, Number.NaN), { slots: fx.index('i32', [T], Array.from({ length: T }, () => -1)) }),
  },

  // KV018: kOut and vOut the same tensor.
  { code: 'KV018', op: 'fusedNormRopeStacked', name: 'kOut === vOut', arg: 'kOut', mentions: ['vOut'], dims: BOUND.fusedAll, call: (fx) => fused(fx, { vOut: fx.kOut }) },

  // KV020: kvWeight not [L, 2*H*D, hidden].
  { code: 'KV020', op: 'createKvMaterializer', name: 'kvWeight is 2-D [2*H*D, hidden] (one layer)', arg: 'kvWeight', dims: BOUND.createParams, call: (fx) => create(fx, { kvWeight: fx.any('f32', [2 * H * D, hidden]) }) },
  { code: 'KV020', op: 'createKvMaterializer', name: 'kvWeight holds K rows only, [L, H*D, hidden]', arg: 'kvWeight', mentions: [`${2 * H * D}`], call: (fx) => create(fx, { kvWeight: fx.any('f32', [L, H * D, hidden]) }) },

  // KV021: exactly one of cosSinCache and ropeBase.
  { code: 'KV021', op: 'createKvMaterializer', name: 'both cosSinCache and ropeBase', mentions: ['cosSinCache and ropeBase'], dims: BOUND.materializer, call: (fx) => create(fx, { ropeBase: 10000 }) },
  { code: 'KV021', op: 'createKvMaterializer', name: 'neither cosSinCache nor ropeBase', mentions: ['neither'], call: (fx) => create(fx, { cosSinCache: undefined }) },

  // KV022: ctxHidden not [T, hidden].
  { code: 'KV022', op: 'KvMaterializer.materialize', name: 'ctxHidden is [T, hidden + 1]', arg: 'ctxHidden', mentions: [`[${T}, ${hidden + 1}]`], dims: BOUND.materialize, call: (fx) => fx.materializer.materialize({ ctxHidden: fx.any('f32', [T, hidden + 1]), positions: fx.positions4, writeLayerKv: noop }) },
  { code: 'KV022', op: 'KvMaterializer.materialize', name: 'ctxHidden is 1-D [T*hidden]', arg: 'ctxHidden', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.any('f32', [T * hidden]), positions: fx.positions4, writeLayerKv: noop }) },
  { code: 'KV022', op: 'KvMaterializer.materializeInto', name: 'ctxHidden is [T, 1, hidden]', arg: 'ctxHidden', call: (fx) => into(fx, { ctxHidden: fx.any('f32', [T, 1, hidden]) }) },

  // KV023 (seed 000): positions count differs from the token count.
  { code: 'KV023', op: 'KvMaterializer.materialize', seed: '000', name: 'positions holds T - 1 entries (last token dropped)', arg: 'positions', mentions: [`${T - 1} entries`, `${T}`], dims: BOUND.materialize, call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i32', [T - 1], [0, 1, 2]), writeLayerKv: noop }) },
  { code: 'KV023', op: 'KvMaterializer.materialize', seed: '000', name: 'positions is [T + 1, 1]', arg: 'positions', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i64', [T + 1, 1], [0, 1, 2, 3, 4]), writeLayerKv: noop }) },
  { code: 'KV023', op: 'KvMaterializer.materializeInto', seed: '000', name: 'positions is [1, T - 1]', arg: 'positions', call: (fx) => into(fx, { positions: fx.index('i32', [1, T - 1], [0, 1, 2]) }) },

  // KV024: materializeInto pools not [L, S, H, D].
  { code: 'KV024', op: 'KvMaterializer.materializeInto', name: 'kPool is 3-D [S, H, D]', arg: 'kPool', dims: BOUND.materialize, call: (fx) => into(fx, { kPool: fx.any('f32', [S, H, D]) }) },
  { code: 'KV024', op: 'KvMaterializer.materializeInto', name: 'vPool is [L + 1, S, H, D]', arg: 'vPool', call: (fx) => into(fx, { vPool: fx.any('f32', [L + 1, S, H, D]) }) },
  { code: 'KV024', op: 'KvMaterializer.materializeInto', name: 'vPool has S + 1 slots, kPool S', arg: 'vPool', mentions: [`${S + 1}`], dims: BOUND.materializeInto, call: (fx) => into(fx, { vPool: fx.any('f32', [L, S + 1, H, D]) }) },

  // KV025: slots not [T].
  { code: 'KV025', op: 'KvMaterializer.materializeInto', name: 'slots is [T + 1]', arg: 'slots', dims: BOUND.materializeInto, call: (fx) => into(fx, { slots: fx.index('i32', [T + 1], [0, 1, 2, 3, 4]) }) },
  { code: 'KV025', op: 'KvMaterializer.materializeInto', name: 'slots is [T, 1] (only positions flatten)', arg: 'slots', call: (fx) => into(fx, { slots: fx.index('i64', [T, 1], [0, 1, 2, 3]) }) },

  // KV026: positions not [T], [T, 1] or [1, T].
  { code: 'KV026', op: 'KvMaterializer.materialize', name: 'positions is [2, 2]', arg: 'positions', mentions: ['[2, 2]'], dims: BOUND.materialize, call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i32', [2, 2], [0, 1, 2, 3]), writeLayerKv: noop }) },
  { code: 'KV026', op: 'KvMaterializer.materialize', name: 'positions is [T, 1, 1]', arg: 'positions', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.index('i32', [T, 1, 1], [0, 1, 2, 3]), writeLayerKv: noop }) },
  { code: 'KV026', op: 'KvMaterializer.materializeInto', name: 'positions is 0-D', arg: 'positions', call: (fx) => into(fx, { positions: fx.index('i64', [], [1]) }) },

  // KV027: a layer view kept past writeLayerKv.
  { code: 'KV027', op: 'fusedNormRopeStacked', name: 'a K view kept from writeLayerKv passed as kv', arg: 'kv', mentions: ['layer 1'], call: (fx) => fused(fx, { kv: fx.staleLayerView() }) },
  { code: 'KV027', op: 'read', name: 'read() of a K view after writeLayerKv returned', rejects: true, call: (fx) => fx.backend.read(fx.staleLayerView()) },

  // KV030: q, k or v not 3-D.
  { code: 'KV030', op: 'ropePoolFused', name: 'q is 2-D [N, Hq*D]', arg: 'q', dims: BOUND.ropeParams, call: (fx) => rope(fx, { q: fx.any('f32', [N, Hq * D]) }) },
  { code: 'KV030', op: 'ropePoolFused', name: 'k is 4-D [N, H, D, 1]', arg: 'k', call: (fx) => rope(fx, { k: fx.any('f32', [N, H, D, 1]) }) },
  { code: 'KV030', op: 'ropePoolFused', name: 'v is 2-D [N, H*D]', arg: 'v', call: (fx) => rope(fx, { v: fx.any('f32', [N, H * D]) }) },

  // KV031: q not [N, Hq, D].
  { code: 'KV031', op: 'ropePoolFused', name: 'q is [N, Hq + 1, D]', arg: 'q', mentions: [`[${N}, ${Hq + 1}, ${D}]`], dims: BOUND.rope, call: (fx) => rope(fx, { q: fx.any('f32', [N, Hq + 1, D]) }) },
  { code: 'KV031', op: 'ropePoolFused', name: 'q is [N, Hq, D + 2]', arg: 'q', call: (fx) => rope(fx, { q: fx.any('f32', [N, Hq, D + 2]) }) },

  // KV032: k or v not [N, H, D].
  { code: 'KV032', op: 'ropePoolFused', name: 'k is [N + 1, H, D]', arg: 'k', dims: BOUND.rope, call: (fx) => rope(fx, { k: fx.any('f32', [N + 1, H, D]) }) },
  { code: 'KV032', op: 'ropePoolFused', name: 'v is [N, H + 1, D]', arg: 'v', call: (fx) => rope(fx, { v: fx.any('f32', [N, H + 1, D]) }) },
  { code: 'KV032', op: 'ropePoolFused', name: 'k is q-shaped [N, Hq, D]', arg: 'k', call: (fx) => rope(fx, { k: fx.any('f32', [N, Hq, D]) }) },

  // KV033: positions or slots not 1-D.
  { code: 'KV033', op: 'ropePoolFused', name: 'positions is [N, 1]', arg: 'positions', dims: BOUND.rope, call: (fx) => rope(fx, { positions: fx.index('i64', [N, 1], [0, 1, 2, 3]) }) },
  { code: 'KV033', op: 'ropePoolFused', name: 'slots is [1, N]', arg: 'slots', call: (fx) => rope(fx, { slots: fx.index('i32', [1, N], [0, 1, 2, 3]) }) },

  // KV034 (seed 001): positions or slots count differs from the token count.
  { code: 'KV034', op: 'ropePoolFused', seed: '001', name: 'positions holds N + 1 entries', arg: 'positions', mentions: [`[${N + 1}]`], dims: BOUND.rope, call: (fx) => rope(fx, { positions: fx.index('i32', [N + 1], [0, 1, 2, 3, 4]) }) },
  { code: 'KV034', op: 'ropePoolFused', seed: '001', name: 'slots holds N - 1 entries', arg: 'slots', call: (fx) => rope(fx, { slots: fx.index('i64', [N - 1], [0, 1, 2]) }) },

  // KV035: pool not 3-D.
  { code: 'KV035', op: 'ropePoolFused', name: 'kPool is 2-D [S, H*D]', arg: 'kPool', dims: BOUND.rope, call: (fx) => rope(fx, { kPool: fx.any('f32', [S, H * D]) }) },
  { code: 'KV035', op: 'ropePoolFused', name: 'vPool is 4-D [1, S, H, D] (the materializer layout)', arg: 'vPool', call: (fx) => rope(fx, { vPool: fx.any('f32', [1, S, H, D]) }) },

  // KV036: pool not [S, H, D].
  { code: 'KV036', op: 'ropePoolFused', name: 'kPool is [S, H, D + 1]', arg: 'kPool', dims: BOUND.ropeAll, call: (fx) => rope(fx, { kPool: fx.any('f32', [S, H, D + 1]) }) },
  { code: 'KV036', op: 'ropePoolFused', name: 'vPool has S + 1 slots, kPool S', arg: 'vPool', mentions: [`${S + 1}`], call: (fx) => rope(fx, { vPool: fx.any('f32', [S + 1, H, D]) }) },
  { code: 'KV036', op: 'ropePoolFused', name: 'kPool is [S, Hq, D] (query heads)', arg: 'kPool', call: (fx) => rope(fx, { kPool: fx.any('f32', [S, Hq, D]) }) },

  // KV037: numQoHeads not a multiple of numKvHeads.
  { code: 'KV037', op: 'ropePoolFused', name: 'numQoHeads = 3, numKvHeads = 2', arg: 'numQoHeads', mentions: ['3', '2'], dims: { H: 2, Hq: 3 }, call: (fx) => rope(fx, { numQoHeads: 3 }) },
  { code: 'KV037', op: 'ropePoolFused', name: 'numQoHeads = 1, numKvHeads = 2', arg: 'numQoHeads', call: (fx) => rope(fx, { numQoHeads: 1 }) },

  // KV038: a slot at or past the pool (device-side value).
  {
    code: 'KV038',
    op: 'ropePoolFused',
    name: 'slots[3] = S, the other tokens fine',
    arg: 'slots',
    mentions: [`slots[3] = ${S}`],
    dims: BOUND.ropeAll,
    deferred: true,
    call: (fx) => rope(fx, { slots: fx.index('i32', [N], [4, -1, 0, S]) }),
  },
  {
    code: 'KV038',
    op: 'ropePoolFused',
    name: 'slots[3] = S with a Q/K-norm (the norm kernels), the other tokens fine',
    arg: 'slots',
    mentions: [`slots[3] = ${S}`],
    dims: BOUND.ropeAll,
    deferred: true,
    call: (fx) => rope(fx, { slots: fx.index('i32', [N], [4, -1, 0, S]), qNormWeight: fx.float('f32', [D]), kNormWeight: fx.float('f32', [D]), eps: 1e-6 }),
  },
  {
    code: 'KV038',
    op: 'ropePoolFused',
    name: 'slots[297] = S in a call of 300 tokens (more than a decode step, checked apart from the writing kernel on a GPU)',
    arg: 'slots',
    mentions: [`slots[297] = ${S}`],
    deferred: true,
    call: (fx) => {
      const many = 300;
      // Every slot of the pool named many times, a seventh of the tokens skipped, one slot past the pool near the end.
      const slots = Array.from({ length: many }, (_, n) => (n === 297 ? S : n % 7 === 0 ? -1 : n % S));
      const positions = Array.from({ length: many }, (_, n) => n);
      return rope(fx, { q: fx.float('f32', [many, Hq, D]), k: fx.float('f32', [many, H, D]), v: fx.float('f32', [many, H, D]), positions: fx.index('i32', [many], positions), slots: fx.index('i32', [many], slots) });
    },
  },
  {
    code: 'KV038',
    op: 'ropePoolFused',
    name: 'every slot at 2^31 - 1',
    arg: 'slots',
    mentions: ['slots[0] = 2147483647'],
    deferred: true,
    call: (fx) => rope(fx, { slots: fx.index('i32', [N], [2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1, 2 ** 31 - 1]) }),
  },
  {
    code: 'KV038',
    op: 'KvMaterializer.materializeInto',
    name: 'slots[2] = 2^40 (i64), the other tokens fine',
    arg: 'slots',
    mentions: [`slots[2] = ${2 ** 40}`],
    dims: BOUND.materializeInto,
    deferred: true,
    call: (fx) => into(fx, { slots: fx.index('i64', [T], [5, 0, 2 ** 40, 2]) }),
  },

  // KV039: kPool and vPool the same tensor.
  { code: 'KV039', op: 'ropePoolFused', name: 'kPool === vPool', arg: 'kPool', mentions: ['vPool'], dims: BOUND.ropeAll, call: (fx) => rope(fx, { vPool: fx.kPool }) },
  { code: 'KV039', op: 'KvMaterializer.materializeInto', name: 'kPool === vPool', arg: 'kPool', call: (fx) => into(fx, { vPool: fx.kPool4 }) },
  // Views: aliasing is by storage, written tensors are contiguous, a fused qkv has its heads' width.
  { code: 'KV039', op: 'ropePoolFused', name: 'k a view overlapping kPool', arg: 'kPool', mentions: ['k'], call: (fx) => rope(fx, { k: fx.backend.view(fx.kPool, [N, H, D], { offset: H * D }) }) },
  { code: 'KV048', op: 'ropePoolFused', name: 'kPool a strided view', arg: 'kPool', mentions: [`[${2 * H * D}, ${D}, 1]`], call: (fx) => rope(fx, { kPool: fx.backend.view(fx.backend.empty(fx.kPool.dtype, [2 * S, H, D]), [S, H, D], { strides: [2 * H * D, D, 1] }) }) },
  { code: 'KV048', op: 'fusedNormRopeStacked', name: 'kOut a transposed view', arg: 'kOut', call: (fx) => untyped(fx.backend).fusedNormRopeStacked(fx.fusedArgs({ kOut: fx.backend.view(fx.kOut, [L, T, H, D], { strides: [T * H * D, H * D, 1, H] }) })) },
  { code: 'KV029', op: 'splitQkv', name: 'qkv [N, Hq, D] for Hq + 2H heads', arg: 'qkv', dims: { Hq, H, D }, call: (fx) => fx.backend.splitQkv(fx.q, { numQoHeads: Hq, numKvHeads: H, headDim: D }) },

  // KV040: invalid shape at tensor creation.
  { code: 'KV040', op: 'tensor', name: 'shape [-1]', mentions: ['[-1]'], call: (fx) => fx.backend.tensor('f32', [-1], []) },
  { code: 'KV040', op: 'empty', name: 'shape [2.5]', call: (fx) => fx.backend.empty('f32', [2.5]) },
  { code: 'KV040', op: 'empty', name: 'shape [NaN]', call: (fx) => fx.backend.empty('f16', [Number.NaN]) },
  { code: 'KV040', op: 'empty', name: 'shape [Infinity]', call: (fx) => fx.backend.empty('i32', [Number.POSITIVE_INFINITY]) },
  { code: 'KV040', op: 'tensor', name: "shape 'abc'", call: (fx) => fx.backend.tensor('f32', 'abc' as never, [1]) },
  { code: 'KV040', op: 'empty', name: 'shape null', call: (fx) => fx.backend.empty('f32', null as never) },
  { code: 'KV040', op: 'empty', name: 'shape missing', call: (fx) => (fx.backend.empty as (d: unknown) => unknown)('bf16') },
  { code: 'KV040', op: 'empty', name: "shape [1, '2']", call: (fx) => fx.backend.empty('f32', [1, '2'] as never) },
  { code: 'KV040', op: 'empty', name: 'shape [2^53] (not a safe integer)', call: (fx) => fx.backend.empty('f32', [2 ** 53]) },
  // biome-ignore lint/suspicious/noSparseArray: a hole in a shape array is the garbage under test
  { code: 'KV040', op: 'empty', name: 'shape [ , 2] (a hole)', call: (fx) => fx.backend.empty('f32', [, 2] as never) },

  // KV041: data length does not match the shape.
  { code: 'KV041', op: 'tensor', name: 'f32 [2, 3] given 5 values', mentions: ['5', '6'], call: (fx) => fx.backend.tensor('f32', [2, 3], [1, 2, 3, 4, 5]) },
  { code: 'KV041', op: 'tensor', name: 'i32 [4] given no values', call: (fx) => fx.backend.tensor('i32', [4], []) },
  { code: 'KV041', op: 'tensor', name: 'bf16 [0] given one value', call: (fx) => fx.backend.tensor('bf16', [0], new Float32Array(1)) },

  // KV042: data not representable.
  { code: 'KV042', op: 'tensor', name: 'i32 data 1.5', mentions: ['1.5', 'i32'], call: (fx) => fx.backend.tensor('i32', [2], [0, 1.5]) },
  { code: 'KV042', op: 'tensor', name: 'i32 data 2^31', call: (fx) => fx.backend.tensor('i32', [1], [2 ** 31]) },
  { code: 'KV042', op: 'tensor', name: 'i32 data NaN', call: (fx) => fx.backend.tensor('i32', [1], [Number.NaN]) },
  { code: 'KV042', op: 'tensor', name: 'i32 data 2^40 from a BigInt64Array', call: (fx) => fx.backend.tensor('i32', [1], BigInt64Array.from([2n ** 40n])) },
  { code: 'KV042', op: 'tensor', name: 'i64 data 2^53 (a number past the safe range)', call: (fx) => fx.backend.tensor('i64', [1], [2 ** 53]) },
  { code: 'KV042', op: 'tensor', name: 'i64 data 2^63 (a bigint past int64)', call: (fx) => fx.backend.tensor('i64', [1], [2n ** 63n]) },
  { code: 'KV042', op: 'tensor', name: 'f32 data holding a bigint', call: (fx) => fx.backend.tensor('f32', [2], [1n, 2n]) },
  { code: 'KV042', op: 'tensor', name: "f16 data holding a string '1'", call: (fx) => fx.backend.tensor('f16', [1], ['1'] as never) },

  // KV043: unknown argument (a misspelt optional argument must not be dropped silently).
  { code: 'KV043', op: 'fusedNormRopeStacked', name: 'rotary_dim (snake case)', arg: 'rotary_dim', mentions: ['rotaryDim'], call: (fx) => fused(fx, { rotary_dim: R }) },
  { code: 'KV043', op: 'fusedNormRopeStacked', name: 'kout (misspelt optional output)', arg: 'kout', call: (fx) => fused(fx, { kout: fx.kOut }) },
  { code: 'KV043', op: 'ropePoolFused', name: 'numHeads', arg: 'numHeads', call: (fx) => rope(fx, { numHeads: 4 }) },
  { code: 'KV043', op: 'createKvMaterializer', name: 'maxPosition (for maxPositionHint)', arg: 'maxPosition', call: (fx) => create(fx, { maxPosition: 64 }) },
  { code: 'KV043', op: 'KvMaterializer.materializeInto', name: 'slot (for slots)', arg: 'slot', call: (fx) => into(fx, { slot: fx.slots4 }) },

  // KV044: callback not a function.
  { code: 'KV044', op: 'KvMaterializer.materialize', name: 'writeLayerKv missing', arg: 'writeLayerKv', dims: BOUND.materialize, call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: undefined }) },
  { code: 'KV044', op: 'KvMaterializer.materialize', name: 'writeLayerKv is a string', arg: 'writeLayerKv', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: 'write' }) },
  { code: 'KV044', op: 'KvMaterializer.materialize', name: 'writeLayerKv is an object', arg: 'writeLayerKv', call: (fx) => fx.materializer.materialize({ ctxHidden: fx.ctxHidden, positions: fx.positions4, writeLayerKv: { call: noop } }) },
  { code: 'KV044', op: 'fusedNormRopeStacked', name: 'the arguments are a number', arg: 'arguments', call: (fx) => untyped(fx.backend).fusedNormRopeStacked(42) },
  {
    code: 'KV044',
    op: 'KvMaterializer.materialize',
    name: 'the positional form materialize(ctxHidden, positions, writeLayerKv)',
    arg: 'arguments',
    mentions: ['one object of named arguments', 'got 3 positional arguments'],
    call: (fx) => (fx.materializer.materialize as (...a: unknown[]) => unknown)(fx.ctxHidden, fx.positions4, noop),
  },
  { code: 'KV044', op: 'ropePoolFused', name: 'the arguments are positional', arg: 'arguments', call: (fx) => (untyped(fx.backend).ropePoolFused as (...a: unknown[]) => unknown)('q', 'k') },

  // KV045: a tensor larger than the backend holds (sized past any device's memory, so every backend refuses it), before any memory is reserved.
  { code: 'KV045', op: 'empty', name: 'shape [2^40]', mentions: ['1099511627776'], call: (fx) => fx.backend.empty('f32', [2 ** 40]) },
  { code: 'KV045', op: 'tensor', name: 'shape [2^20, 2^20]', mentions: ['bf16'], call: (fx) => fx.backend.tensor('bf16', [2 ** 20, 2 ** 20], []) },
  ...poolValidationCases,
  ...pagedValidationCases,
  ...mlaValidationCases,
  ...mropeQkNormValidationCases,
  ...mropeMaterializerValidationCases,
  ...ropeScalingValidationCases,
];

/** The seeds of shared/seeds/, by number: each must have at least one case. */
export const SEEDS = ['000', '001', '002', '003', '004'] as const;
