import { buildCosSinCache, randomValues, Rng } from '@kvkit/conformance';
import type { Backend, Tensor } from '@kvkit/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';

type Untyped = { fusedNormRopeStacked(a: unknown): { kOut: Tensor; vOut: Tensor } };
const ops = (b: Backend) => b as unknown as Untyped;

const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: value-check tests skipped, no WebGPU adapter here: ${probe.reason}`);

describe.skipIf(!probe.ok)(`value checks settled by read()${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  let b: Backend;
  const [T, L, H, D, P] = [5, 2, 1, 6, 9];
  let base: Record<string, unknown>;
  let made: Tensor[];
  beforeAll(async () => {
    b = await createWebGpuBackend();
    const rng = new Rng(31);
    made = [
      b.tensor('bf16', [T, L, 2 * H * D], randomValues(rng, T * L * 2 * H * D)),
      b.tensor('f32', [L, D], randomValues(rng, L * D)),
      b.tensor('f32', [L], [1e-6, 1e-5]),
      b.tensor('f32', [P, D], buildCosSinCache(P, D, 10000)),
      b.tensor('bf16', [L, T, H, D], randomValues(rng, L * T * H * D)),
      b.tensor('bf16', [L, T, H, D], randomValues(rng, L * T * H * D)),
    ];
    const [kv, kNormWeight, eps, cosSinCache, kOut, vOut] = made;
    base = { kv, kNormWeight, eps, cosSinCache, kOut, vOut, numKvHeads: H, headDim: D, rotaryDim: D };
  });
  afterAll(() => {
    for (const t of made) t.dispose();
    b?.dispose();
  });

  /** One call whose positions tensor is dropped right after: only the pending check still holds its storage. */
  function callWithDroppedPositions(positions: number[]): void {
    const p = b.tensor('i32', [T], positions);
    ops(b).fusedNormRopeStacked({ ...base, positions: p });
    p.dispose();
  }

  it('a loop that reads but never syncs keeps no positions buffers', async () => {
    await b.sync();
    callWithDroppedPositions([0, 1, 2, 3, 4]);
    await b.read(base.kOut as Tensor);
    await new Promise((done) => setTimeout(done, 0));
    const after1 = webGpuBackendStats(b).liveBuffers;
    for (let i = 0; i < 40; i++) {
      callWithDroppedPositions([i % P, 1, 2, 3, (i + 4) % P]);
      await b.read(base.kOut as Tensor);
    }
    await new Promise((done) => setTimeout(done, 0));
    expect(webGpuBackendStats(b).liveBuffers).toBe(after1);
    await expect(b.sync()).resolves.toBeUndefined();
  });

  it('a violation a read settled is the next sync’s, once, and names the first bad call', async () => {
    await b.sync();
    callWithDroppedPositions([0, 1, 2, P + 3, 4]);
    callWithDroppedPositions([0, -2, 2, 3, 4]);
    const k = await b.readBits(base.kOut as Tensor);
    expect(k.length).toBe(L * T * H * D);
    callWithDroppedPositions([0, 1, 2, 3, 4]);
    await b.read(base.vOut as Tensor);
    await expect(b.sync()).rejects.toMatchObject({ code: 'KV017', op: 'fusedNormRopeStacked', details: { index: 3, actual: P + 3, expected: P } });
    await expect(b.sync()).resolves.toBeUndefined();
  });

  it('a violation after the last read is still found by sync, after one a read settled', async () => {
    await b.sync();
    callWithDroppedPositions([0, 1, 2, 3, 4]);
    await b.read(base.kOut as Tensor);
    callWithDroppedPositions([0, 1, P, 3, 4]);
    await expect(b.sync()).rejects.toMatchObject({ code: 'KV017', details: { index: 2, actual: P } });
    await expect(b.sync()).resolves.toBeUndefined();
  });
});
