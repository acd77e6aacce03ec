import { checkNormedMropeIntoFp8Pool, checkRopePoolIntoPools, NORMED_MROPE_CASES, POOL_CASES, randomPositive, randomValues, Rng, seedOf, slotPermutation } from '@kvkit/conformance';
import type { Backend, PoolDType, Tensor } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';
import { onDefaultLimits } from './defaultLimits.js';

/**
 * The row kernels write paged (HND) and fp8 pools themselves: a call into
 * them records the same dispatches as one into NHD pools of the model dtype,
 * with no pool pass after the rows, on a device with every binding the
 * kernels want and on one with WebGPU's default eight (where the parts run
 * apart, the fp8 scales read after the cos/sin rows). fp8 pools of a head dim
 * that is not a multiple of 4 share words between rows and keep the pass.
 * The bytes written are the CPU reference's (the conformance checks).
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: pool-write tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const skipNote = probe.ok ? '' : ' (skipped: no WebGPU adapter)';
const TIMEOUT_MS = 120_000;

type Untyped = {
  ropePoolFused(a: unknown): unknown;
  createKvMaterializer(a: unknown): { materializeInto(a: unknown): void; dispose(): void };
};
const ops = (b: Backend) => b as unknown as Untyped;

interface Pools {
  readonly layout: 'NHD' | 'HND';
  readonly poolType: PoolDType;
  readonly D: number;
}

const [H, PAGE_SIZE, PAGES] = [2, 4, 3];
const SLOTS = PAGE_SIZE * PAGES;

/** Pools of `p` (with per-head scales for fp8), `[L]` in front where given. */
function poolArgs(b: Backend, rng: Rng, p: Pools, leading: number[] = []) {
  const shape = p.layout === 'NHD' ? [...leading, SLOTS, H, p.D] : [...leading, PAGES, H, PAGE_SIZE, p.D];
  const n = shape.reduce((a, x) => a * x, 1);
  return {
    layout: p.layout,
    kPool: b.tensor(p.poolType, shape, randomValues(rng, n)),
    vPool: b.tensor(p.poolType, shape, randomValues(rng, n)),
    ...(isFp8(p.poolType) ? { kScale: b.tensor('f32', [H], randomPositive(rng, H, 0.25, 2)), vScale: b.tensor('f32', [H], randomPositive(rng, H, 0.25, 2)) } : {}),
  };
}

/** Slots of N tokens, two negative, the last repeating another token's. */
function slotsOf(rng: Rng, N: number): Int32Array {
  const slots = slotPermutation(rng, N - 1, SLOTS, 2);
  return Int32Array.from([...slots, slots.find((x) => x >= 0)!]);
}

/** The arguments of a ropePoolFused call into pools `p` (with a Q/K-norm where asked), the same values for the same `p`. */
function ropePoolArgs(b: Backend, p: Pools, qkNorm: boolean) {
  const rng = new Rng(seedOf(`pool writes ${p.layout} ${p.poolType} ${p.D} ${qkNorm}`));
  const [N, Hq] = [7, 2 * H];
  const model = isFp8(p.poolType) ? 'bf16' : p.poolType;
  return {
    q: b.tensor(model, [N, Hq, p.D], randomValues(rng, N * Hq * p.D)),
    k: b.tensor(model, [N, H, p.D], randomValues(rng, N * H * p.D)),
    v: b.tensor(model, [N, H, p.D], randomValues(rng, N * H * p.D)),
    positions: b.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => 2 * n + 1)),
    slots: b.tensor('i32', [N], slotsOf(rng, N)),
    ...poolArgs(b, rng, p),
    ...(qkNorm ? { qNormWeight: b.tensor('f32', [p.D], randomPositive(rng, p.D)), kNormWeight: b.tensor('f32', [p.D], randomPositive(rng, p.D)), eps: 1e-6 } : {}),
    headDim: p.D,
    rotaryDim: p.D - (p.D % 2),
    numQoHeads: Hq,
    numKvHeads: H,
    ropeBase: 10000,
  };
}

/** Dispatches one ropePoolFused call into pools `p` records (with a Q/K-norm where asked). */
async function ropePoolDispatches(b: Backend, p: Pools, qkNorm: boolean): Promise<number> {
  const args = ropePoolArgs(b, p, qkNorm);
  const before = webGpuBackendStats(b).dispatches;
  ops(b).ropePoolFused(args);
  const recorded = webGpuBackendStats(b).dispatches - before;
  await b.sync();
  return recorded;
}

/** Dispatches one materializeInto call into pools `p` records. */
async function materializeDispatches(b: Backend, p: Pools): Promise<number> {
  const rng = new Rng(seedOf(`materialize pool writes ${p.layout} ${p.poolType} ${p.D}`));
  const [L, T, hidden] = [2, 5, 16];
  const model = isFp8(p.poolType) ? 'bf16' : p.poolType;
  const m = ops(b).createKvMaterializer({
    kvWeight: b.tensor(model, [L, 2 * H * p.D, hidden], randomValues(rng, L * 2 * H * p.D * hidden, 0.02, 0.2)),
    kNormWeight: b.tensor('f32', [L, p.D], randomPositive(rng, L * p.D)),
    eps: 1e-5,
    numKvHeads: H,
    headDim: p.D,
    rotaryDim: p.D - (p.D % 2),
    ropeBase: 10000,
  });
  try {
    const args = {
      ctxHidden: b.tensor(model, [T, hidden], randomValues(rng, T * hidden)),
      positions: b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => 3 * t)),
      slots: b.tensor('i32', [T], slotsOf(rng, T)),
      ...poolArgs(b, rng, p, [L]),
    };
    const before = webGpuBackendStats(b).dispatches;
    m.materializeInto(args);
    const recorded = webGpuBackendStats(b).dispatches - before;
    await b.sync();
    return recorded;
  } finally {
    m.dispose();
  }
}

const PLAIN: Pools = { layout: 'NHD', poolType: 'bf16', D: 8 };
/** Pools the row kernels write: paged of the model dtype (odd D too), fp8 in both layouts with rows of one and two words per vector. */
const WRITTEN_BY_ROWS: readonly Pools[] = [
  { layout: 'HND', poolType: 'bf16', D: 8 },
  { layout: 'HND', poolType: 'bf16', D: 5 },
  { layout: 'NHD', poolType: 'fp8e4m3', D: 8 },
  { layout: 'HND', poolType: 'fp8e5m2', D: 16 },
  { layout: 'HND', poolType: 'fp8e4m3', D: 12 },
];
const SHARED_WORDS: Pools = { layout: 'HND', poolType: 'fp8e4m3', D: 6 };
const label = (p: Pools) => `${p.layout} ${p.poolType} D=${p.D}`;

let gpu: Backend;
let cpu: Backend;
beforeAll(async () => {
  if (!probe.ok) return;
  gpu = await createWebGpuBackend();
  cpu = createCpuBackend();
});
afterAll(() => {
  gpu?.dispose();
  cpu?.dispose();
});

withDevice(`paged and fp8 pools, written by the row kernels${skipNote}`, () => {
  it(
    'ropePoolFused, with and without a Q/K-norm: the dispatches of NHD pools of the model dtype; a pool pass only where fp8 rows share words',
    async () => {
      for (const qkNorm of [false, true]) {
        const plain = await ropePoolDispatches(gpu, PLAIN, qkNorm);
        // cos/sin table, the check of the slots, the slot ownership pass (one workgroup: a call of few tokens), then every row in one dispatch.
        expect(plain).toBe(4);
        for (const p of WRITTEN_BY_ROWS) expect(await ropePoolDispatches(gpu, p, qkNorm), `${label(p)}, Q/K-norm ${qkNorm}`).toBe(plain);
        // Table, q rows and k rows dense, the check of the slots, the ownership pass, then the K and V pool stores.
        expect(await ropePoolDispatches(gpu, SHARED_WORDS, qkNorm), label(SHARED_WORDS)).toBe(7);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'materializeInto: the dispatches of NHD pools of the model dtype; two pool stores more only where fp8 rows share words',
    async () => {
      const plain = await materializeDispatches(gpu, PLAIN);
      for (const p of WRITTEN_BY_ROWS) expect(await materializeDispatches(gpu, p), label(p)).toBe(plain);
      expect(await materializeDispatches(gpu, SHARED_WORDS)).toBe(plain + 2);
    },
    TIMEOUT_MS,
  );

  it(
    'on a device with the default 8 storage bindings: the parts apart, no pool pass, the bytes of the CPU reference',
    async () => {
      await onDefaultLimits(async (small, device) => {
        const p: Pools = { layout: 'HND', poolType: 'fp8e4m3', D: 16 };
        // Table, check of the slots, ownership pass, then q rows and k + v rows (RoPE only), or q, k and v rows (Q/K-norm).
        expect(await ropePoolDispatches(small, p, false)).toBe(5);
        expect(await ropePoolDispatches(small, p, true)).toBe(6);
        for (const c of POOL_CASES.filter((x) => isFp8(x.poolType) && x.D % 4 === 0)) await checkRopePoolIntoPools(small, cpu, c);
        await checkNormedMropeIntoFp8Pool(small, cpu, NORMED_MROPE_CASES.find((c) => c.D % 4 === 0)!);

        // Scales in the application's own buffers, made without COPY_SRC: placed by the strided copy, the same codes.
        const owned = ropePoolArgs(small, p, false);
        const wrapped = ropePoolArgs(small, p, false);
        const buffers = await Promise.all(
          [owned.kScale!, owned.vScale!].map(async (t) => {
            const buffer = device.createBuffer({ size: 4 * H, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_DST });
            device.queue.writeBuffer(buffer, 0, (await small.read(t)) as Float32Array);
            return buffer;
          }),
        );
        const gathers = webGpuBackendStats(small).gathers;
        ops(small).ropePoolFused(owned);
        ops(small).ropePoolFused({ ...wrapped, kScale: small.wrap(buffers[0]!, 'f32', [H]), vScale: small.wrap(buffers[1]!, 'f32', [H]) });
        expect(webGpuBackendStats(small).gathers - gathers).toBe(2);
        for (const pool of ['kPool', 'vPool'] as const) {
          const [a, e] = await Promise.all([small.readBits(wrapped[pool] as Tensor), small.readBits(owned[pool] as Tensor)]);
          expect(a, pool).toEqual(e);
        }
        for (const buffer of buffers) buffer.destroy();
      });
    },
    TIMEOUT_MS,
  );
});
