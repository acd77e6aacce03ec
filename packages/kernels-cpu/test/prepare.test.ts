/**
 * `prepare` on the CPU backend: nothing to build, so it resolves once the
 * arguments pass the call's own validator, writes nothing, and rejects with
 * the call's ContractError when they do not.
 */
import { ContractError } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { createCpuBackend } from '../src/index.js';

describe('prepare on the CPU backend', () => {
  const b = createCpuBackend();
  const [N, H, D, S] = [3, 2, 4, 5];
  const args = {
    q: b.tensor('f32', [N, H, D], Array.from({ length: N * H * D }, (_, i) => i / 7)),
    k: b.tensor('f32', [N, H, D], Array.from({ length: N * H * D }, (_, i) => -i / 5)),
    v: b.tensor('f32', [N, H, D], Array.from({ length: N * H * D }, (_, i) => i / 3)),
    positions: b.tensor('i32', [N], [0, 2, 9]),
    slots: b.tensor('i32', [N], [4, 1, 4]),
    kPool: b.tensor('f32', [S, H, D], new Float32Array(S * H * D).fill(0.5)),
    vPool: b.tensor('f32', [S, H, D], new Float32Array(S * H * D).fill(-0.5)),
    numQoHeads: H, numKvHeads: H, headDim: D, ropeBase: 10000,
  };

  it('resolves for valid arguments and writes nothing', async () => {
    await expect(b.prepare('ropePoolFused', args)).resolves.toBeUndefined();
    expect(Array.from(await b.read(args.kPool))).toEqual(new Array(S * H * D).fill(0.5));
    expect(Array.from(await b.read(args.vPool))).toEqual(new Array(S * H * D).fill(-0.5));
  });

  it('rejects with the error the call throws', async () => {
    const bad = { ...args, kPool: b.empty('f32', [S, H, D + 1]) };
    let thrown: unknown;
    try {
      b.ropePoolFused(bad);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(ContractError);
    const rejected = await b.prepare('ropePoolFused', bad).catch((e: unknown) => e);
    expect(rejected).toBeInstanceOf(ContractError);
    expect((rejected as Error).message).toBe((thrown as Error).message);
    await expect(b.prepare('noSuchOp' as never, {} as never)).rejects.toMatchObject({ code: 'KV044' });
  });

  const attention = {
    q: args.q, kPool: args.kPool, vPool: args.vPool,
    qIndptr: b.tensor('i32', [3], [0, 1, 3]), kvIndptr: b.tensor('i32', [3], [0, 2, 5]), kvSlots: b.tensor('i32', [5], [4, 0, 1, 2, 3]),
    numQoHeads: H, numKvHeads: H, headDim: D,
  };
  const copy = { kSrc: args.kPool, vSrc: args.vPool, kDst: b.tensor('f32', [S, H, D], new Float32Array(S * H * D).fill(2)), vDst: b.tensor('f32', [S, H, D], new Float32Array(S * H * D).fill(-2)), fromSlots: b.tensor('i32', [2], [0, 4]), toSlots: b.tensor('i32', [2], [1, 3]) };

  it('pagedAttention and copySlots: resolves for valid arguments and writes nothing', async () => {
    const out = b.tensor('f32', [N, H, D], new Float32Array(N * H * D).fill(7));
    await expect(b.prepare('pagedAttention', { ...attention, out })).resolves.toBeUndefined();
    await expect(b.prepare('copySlots', copy)).resolves.toBeUndefined();
    expect(Array.from(await b.read(out))).toEqual(new Array(N * H * D).fill(7));
    expect(Array.from(await b.read(copy.kDst))).toEqual(new Array(S * H * D).fill(2));
    expect(Array.from(await b.read(copy.vDst))).toEqual(new Array(S * H * D).fill(-2));
  });

  it('pagedAttention and copySlots: a bad call rejects with the code its call throws, index values included (the CPU holds them)', async () => {
    const bad: [string, 'pagedAttention' | 'copySlots', Record<string, unknown>][] = [
      ['KV080', 'pagedAttention', { ...attention, kvSlots: b.tensor('i32', [5], [4, 0, 1, 2, S]) }],
      ['KV079', 'pagedAttention', { ...attention, qIndptr: b.tensor('i32', [3], [0, 3, 3]) }],
      ['KV077', 'pagedAttention', { ...attention, kvIndptr: b.tensor('i32', [2], [0, 5]) }],
      ['KV038', 'copySlots', { ...copy, toSlots: b.tensor('i32', [2], [1, S]) }],
      ['KV083', 'copySlots', { ...copy, toSlots: b.tensor('i32', [1], [1]) }],
    ];
    for (const [code, op, call] of bad) {
      let thrown: unknown;
      try {
        (b[op] as (a: unknown) => unknown)(call);
      } catch (e) {
        thrown = e;
      }
      expect(thrown, `${op} ${code}`).toMatchObject({ code });
      const rejected = await b.prepare(op, call as never).catch((e: unknown) => e);
      expect(rejected).toBeInstanceOf(ContractError);
      expect((rejected as Error).message).toBe((thrown as Error).message);
    }
    expect(Array.from(await b.read(copy.kDst))).toEqual(new Array(S * H * D).fill(2));
  });
});
