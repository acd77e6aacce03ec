import { FIXTURE } from './fixture.js';
import type { Fixture } from './fixture.js';
import { untyped } from './tensors.js';
import type { ValidationCase } from './validation-cases.js';

/** The pool-layout and fp8 checks (ops/kvPools.ts), one changed thing each in the fixture's valid calls. */
const { L, H, D, S, Hq } = FIXTURE;

const rope = (fx: Fixture, over: Record<string, unknown>) => untyped(fx.backend).ropePoolFused(fx.ropeArgs(over));
const into = (fx: Fixture, over: Record<string, unknown>) => fx.materializer.materializeInto(fx.intoArgs(over));
const dequantize = (fx: Fixture, args: Record<string, unknown>) => (fx.backend.dequantizeKv as (a: unknown) => void)(args);
const fp8Pools = (fx: Fixture, shape: readonly number[]) => ({ kPool: fx.float('fp8e4m3', shape), vPool: fx.float('fp8e4m3', shape) });
const scales = (fx: Fixture, n = 1) => ({ kScale: fx.float('f32', [n]), vScale: fx.float('f32', [n]) });

export const poolValidationCases: readonly ValidationCase[] = [
  { code: 'KV070', op: 'ropePoolFused', name: 'fp8 pools without scales', arg: 'kScale', mentions: ['fp8e4m3'], call: (fx) => rope(fx, fp8Pools(fx, [S, H, D])) },
  { code: 'KV070', op: 'KvMaterializer.materializeInto', name: 'fp8 pools without vScale', arg: 'vScale', call: (fx) => into(fx, { ...fp8Pools(fx, [L, S, H, D]), kScale: fx.float('f32', [1]) }) },
  { code: 'KV070', op: 'dequantizeKv', name: 'an fp8 pool without its scale', arg: 'scale', call: (fx) => dequantize(fx, { pool: fx.float('fp8e5m2', [S, H, D]), slots: fx.index('i32', [2], [0, 1]), rows: fx.float('f32', [2, H, D]) }) },
  { code: 'KV071', op: 'ropePoolFused', name: 'scales with model-dtype pools', arg: 'kScale', call: (fx) => rope(fx, scales(fx)) },
  { code: 'KV071', op: 'KvMaterializer.materializeInto', name: 'scales with model-dtype pools', arg: 'kScale', call: (fx) => into(fx, scales(fx)) },
  { code: 'KV072', op: 'ropePoolFused', name: 'a scale per query head', arg: 'kScale', mentions: ['[1]', '[H]'], call: (fx) => rope(fx, { ...fp8Pools(fx, [S, H, D]), ...scales(fx, Hq) }) },
  { code: 'KV072', op: 'KvMaterializer.materializeInto', name: 'a [1, H] scale', arg: 'kScale', call: (fx) => into(fx, { ...fp8Pools(fx, [L, S, H, D]), kScale: fx.float('f32', [1, H]), vScale: fx.float('f32', [1]) }) },
  { code: 'KV073', op: 'ropePoolFused', name: "an NHD pool with layout 'HND'", arg: 'kPool', mentions: ['numPages', 'pageSize'], call: (fx) => rope(fx, { layout: 'HND' }) },
  { code: 'KV073', op: 'ropePoolFused', name: 'HND pools of other page counts', arg: 'vPool', call: (fx) => rope(fx, { layout: 'HND', kPool: fx.float('f32', [3, H, 2, D]), vPool: fx.float('f32', [2, H, 3, D]) }) },
  { code: 'KV073', op: 'KvMaterializer.materializeInto', name: "an NHD pool with layout 'HND'", arg: 'kPool', call: (fx) => into(fx, { layout: 'HND' }) },
  { code: 'KV074', op: 'dequantizeKv', name: 'rows [N, H*D]', arg: 'rows', call: (fx) => dequantize(fx, { pool: fx.float('f32', [S, H, D]), slots: fx.index('i32', [2], [0, 1]), rows: fx.float('f32', [2, H * D]) }) },
  {
    code: 'KV075',
    op: 'dequantizeKv',
    name: 'rows is the pool',
    arg: 'rows',
    call: (fx) => {
      const pool = fx.float('f32', [S, H, D]);
      return dequantize(fx, { pool, slots: fx.index('i32', [S], [5, 4, 3, 2, 1, 0]), rows: pool });
    },
  },
];
