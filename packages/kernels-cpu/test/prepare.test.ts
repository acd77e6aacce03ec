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
});
