/**
 * Tensor parallelism in one process, as the ranks of an engine run it: one
 * backend per device, rank r owning KV heads [r·H/tp, (r+1)·H/tp) and the
 * query heads of those groups, its pools holding only those heads, and for
 * the materializer the K and V rows of those heads of kvWeight. Each rank's
 * outputs and pools are compared bit for bit with the heads' slice of a run
 * over all heads on one device; the ranks' work, enqueued on every rank
 * before any syncs, runs at once. Below two devices it skips, saying why.
 * Written against describe/it/beforeAll/afterAll only, for the device bundle.
 */
import type { Backend, Tensor } from '@kvkit/contracts';
import { expectMatch, RELATIVE_TOLERANCE } from '@kvkit/conformance';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createCudaBackend, probeCuda } from '../src/index.js';
import { untyped, values } from './checkSupport.js';

type Bits = Uint16Array | Uint32Array;

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

/** Heads [from, to) of an [outer, heads, D] array, as a contiguous [outer, to - from, D] one. */
function headSlice<A extends Bits | Float32Array>(a: A, heads: number, D: number, from: number, to: number): A {
  const outer = a.length / (heads * D);
  const out = new (a.constructor as new (n: number) => A)(outer * (to - from) * D);
  for (let o = 0; o < outer; o++) out.set(a.subarray((o * heads + from) * D, (o * heads + to) * D), o * (to - from) * D);
  return out;
}

/** Where two bit arrays first differ, or -1. */
const firstDifference = (a: Bits, b: Bits) => (a.length !== b.length ? Math.min(a.length, b.length) : a.findIndex((x, i) => x !== b[i]));

/** The K and V rows of heads [from, to) in each layer of a [L, 2·H·D, hidden] weight: [L, 2·(to - from)·D, hidden]. */
function weightRows(w: Float32Array, L: number, H: number, D: number, hidden: number, from: number, to: number): Float32Array {
  const rows = (to - from) * D;
  const out = new Float32Array(L * 2 * rows * hidden);
  for (let l = 0; l < L; l++) {
    for (const part of [0, 1]) {
      const src = ((l * 2 + part) * H + from) * D * hidden;
      out.set(w.subarray(src, src + rows * hidden), (l * 2 + part) * rows * hidden);
    }
  }
  return out;
}

/** The ranks: every device up to a power of two that divides the heads (8), or `devices` as given (a device may repeat). */
function rankDevices(devices: readonly number[] | undefined): { devices: readonly number[]; why: string } {
  if (devices) return { devices, why: '' };
  const probe = probeCuda();
  const found = probe.ok ? probe.devices.length : 0;
  if (found < 2) return { devices: [], why: `needs 2 CUDA devices, found ${found}${probe.ok ? '' : ` (${probe.reason})`}` };
  let tp = 2;
  while (tp * 2 <= Math.min(found, 8)) tp *= 2;
  return { devices: Array.from({ length: tp }, (_, r) => r), why: '' };
}

export function defineTensorParallelChecks(options: { readonly devices?: readonly number[] } = {}): void {
  const { devices, why } = rankDevices(options.devices);
  const tp = devices.length;
  const title = `cuda: tensor parallel, one backend per device${tp ? ` (tp = ${tp} on devices ${devices.join(', ')})` : ''}`;
  if (why) {
    console.log(`kernels-cuda: ${title} skipped: ${why}`);
    describe(title, () => {
      it.skip(`(skipped: ${why})`, () => {});
    });
    return;
  }
  const distinct = new Set(devices).size === tp;

  describe(`${title}: contexts`, () => {
    it("a rank keeps working after another device's rank is disposed (its pinned memory is its own context's)", async () => {
      const ranks = await Promise.all(devices.map((device) => createCudaBackend({ device, gemm: 'kvkit' })));
      const [first, ...others] = ranks as [Backend, ...Backend[]];
      try {
        // The other ranks' calls leave their contexts current when the first one first needs pinned memory.
        for (const r of others) r.tensor('f32', [4], [1, 2, 3, 4]).dispose();
        await first.sync();
        for (const r of others) r.dispose();
        const t = first.tensor('f32', [16], values(16, 5));
        const got = await first.read(t);
        check(got.every((x, i) => x === values(16, 5)[i]), 'a read after the other ranks were disposed lost its values');
        await first.sync();
      } finally {
        for (const r of ranks) r.dispose();
      }
    }, 120_000);
  });

  describe(title, () => {
    let full: Backend | undefined;
    let ranks: Backend[] = [];
    beforeAll(async () => {
      // The package GEMM sums each output over hidden in one order whatever the rows: a shard's projection is bit for bit the full one's.
      full = await createCudaBackend({ device: devices[0], gemm: 'kvkit' });
      ranks = await Promise.all(devices.map((device) => createCudaBackend({ device, gemm: 'kvkit' })));
    }, 120_000);
    afterAll(() => {
      for (const r of ranks) r.dispose();
      full?.dispose();
    });

    for (const dtype of ['bf16', 'f32'] as const) {
      it(`ropePoolFused with Q/K-norm: each rank's qRot, kRot and pools are its heads of the one-device run, bit for bit [${dtype}]`, async () => {
        const [N, Hq, H, D, S] = [96, 32, 8, 128, 256];
        const data = { q: values(N * Hq * D, 41), k: values(N * H * D, 42), v: values(N * H * D, 43), qNorm: values(D, 44).map((x) => 1 + x / 4), kNorm: values(D, 45).map((x) => 1 + x / 4) };
        const positions = Int32Array.from({ length: N }, (_, n) => (n * 37) % 3000);
        // Token 50 names token 10's slot (the last one writes it); token 20 skips.
        const slots = Int32Array.from({ length: N }, (_, n) => (n === 50 ? 10 : n === 20 ? -1 : (n * 7) % S));
        const run = (b: Backend, from: number, to: number) => {
          const [hq0, hq1] = [(from * Hq) / H, (to * Hq) / H];
          const pools = { kPool: b.empty(dtype, [S, to - from, D]), vPool: b.empty(dtype, [S, to - from, D]) };
          const inputs = {
            q: b.tensor(dtype, [N, hq1 - hq0, D], headSlice(data.q, Hq, D, hq0, hq1)),
            k: b.tensor(dtype, [N, to - from, D], headSlice(data.k, H, D, from, to)),
            v: b.tensor(dtype, [N, to - from, D], headSlice(data.v, H, D, from, to)),
            positions: b.tensor('i32', [N], positions),
            slots: b.tensor('i32', [N], slots),
            qNormWeight: b.tensor('f32', [D], data.qNorm),
            kNormWeight: b.tensor('f32', [D], data.kNorm),
          };
          const out = untyped(b).ropePoolFused({ ...inputs, ...pools, eps: 1e-6, numQoHeads: hq1 - hq0, numKvHeads: to - from, headDim: D, ropeBase: 1e6 });
          return { out: [out.qRot, out.kRot, pools.kPool, pools.vPool], made: [...Object.values(inputs), ...Object.values(pools), out.qRot, out.kRot] as Tensor[] };
        };
        const whole = run(full!, 0, H);
        const shards = ranks.map((b, r) => run(b, (r * H) / tp, ((r + 1) * H) / tp));
        try {
          await Promise.all([full!.sync(), ...ranks.map((b) => b.sync())]);
          const want = (await Promise.all(whole.out.map((t) => full!.readBits(t)))) as Bits[];
          for (const [r, shard] of shards.entries()) {
            const got = (await Promise.all(shard.out.map((t) => ranks[r]!.readBits(t)))) as Bits[];
            for (const [i, name] of ['qRot', 'kRot', 'kPool', 'vPool'].entries()) {
              const heads = i === 0 ? Hq : H;
              const [from, to] = [(r * heads) / tp, ((r + 1) * heads) / tp];
              const at = firstDifference(got[i]!, headSlice(want[i]!, heads, D, from, to));
              check(at < 0, `rank ${r}: ${name} (heads ${from}..${to - 1}) differs from the one-device run at element ${at}`);
            }
          }
        } finally {
          for (const t of [...whole.made, ...shards.flatMap((s) => s.made)]) t.dispose();
        }
      }, 120_000);
    }

    const materializer = (b: Backend, dims: { L: number; H: number; D: number; hidden: number }, weight: Float32Array, from: number, to: number) =>
      untyped(b).createKvMaterializer({
        kvWeight: b.tensor('bf16', [dims.L, 2 * (to - from) * dims.D, dims.hidden], weightRows(weight, dims.L, dims.H, dims.D, dims.hidden, from, to)),
        kNormWeight: b.tensor('f32', [dims.L, dims.D], values(dims.L * dims.D, 52).map((x) => 1 + x / 4)),
        eps: 1e-6,
        numKvHeads: to - from,
        headDim: dims.D,
        ropeBase: 1e6,
      });

    it("materializeInto: each rank's pools, from the K and V rows of its heads in kvWeight, are its heads of the one-device run, bit for bit [bf16]", async () => {
      const dims = { L: 3, H: 8, D: 128, hidden: 256 };
      const [T, S] = [40, 64];
      const { L, H, D, hidden } = dims;
      const weight = values(L * 2 * H * D * hidden, 51, 0.1);
      const ctx = values(T * hidden, 53);
      const positions = Int32Array.from({ length: T }, (_, t) => 500 + 13 * t);
      const slots = Int32Array.from({ length: T }, (_, t) => (t === 30 ? 3 : t === 7 ? -1 : (t * 5) % S));
      const run = (b: Backend, from: number, to: number) => {
        const m = materializer(b, dims, weight, from, to);
        const pools = { kPool: b.empty('bf16', [L, S, to - from, D]), vPool: b.empty('bf16', [L, S, to - from, D]) };
        const inputs = { ctxHidden: b.tensor('bf16', [T, hidden], ctx), positions: b.tensor('i32', [T], positions), slots: b.tensor('i32', [T], slots) };
        m.materializeInto({ ...inputs, ...pools });
        return { m, pools: [pools.kPool, pools.vPool], made: [...Object.values(inputs), ...Object.values(pools)] as Tensor[] };
      };
      const whole = run(full!, 0, H);
      const shards = ranks.map((b, r) => run(b, (r * H) / tp, ((r + 1) * H) / tp));
      try {
        await Promise.all([full!.sync(), ...ranks.map((b) => b.sync())]);
        const want = (await Promise.all(whole.pools.map((t) => full!.readBits(t)))) as Bits[];
        const wantValues = (await Promise.all(whole.pools.map((t) => full!.read(t)))) as Float32Array[];
        check(wantValues[0]!.some((x) => x !== 0), 'the one-device run wrote nothing');
        for (const [r, shard] of shards.entries()) {
          const got = (await Promise.all(shard.pools.map((t) => ranks[r]!.readBits(t)))) as Bits[];
          const [from, to] = [(r * H) / tp, ((r + 1) * H) / tp];
          for (const [i, name] of ['kPool', 'vPool'].entries()) {
            const at = firstDifference(got[i]!, headSlice(want[i]!, H, D, from, to));
            check(at < 0, `rank ${r}: ${name} (heads ${from}..${to - 1}) differs from the one-device run at element ${at}`);
          }
        }
      } finally {
        whole.m.dispose();
        for (const s of shards) s.m.dispose();
        for (const t of [...whole.made, ...shards.flatMap((s) => s.made)]) t.dispose();
      }
    }, 120_000);

    it('materializeInto with cuBLASLt: each rank within rounding of the one-device run (its algorithm may differ with the rows)', async () => {
      const lt = await Promise.all([createCudaBackend({ device: devices[0] }), ...devices.map((device) => createCudaBackend({ device }))]);
      const [one, ...shardBackends] = lt as [Backend, ...Backend[]];
      const dims = { L: 2, H: 8, D: 128, hidden: 512 };
      const [T, S] = [64, 64];
      const { L, H, D, hidden } = dims;
      const weight = values(L * 2 * H * D * hidden, 61, 0.05);
      const ctx = values(T * hidden, 62);
      const positions = Int32Array.from({ length: T }, (_, t) => 17 * t);
      const slots = Int32Array.from({ length: T }, (_, t) => t);
      const made: Tensor[] = [];
      const ms: { dispose(): void }[] = [];
      const run = (b: Backend, from: number, to: number) => {
        const m = materializer(b, dims, weight, from, to);
        ms.push(m);
        const vPool = b.empty('bf16', [L, S, to - from, D]);
        const kPool = b.empty('bf16', [L, S, to - from, D]);
        const inputs = { ctxHidden: b.tensor('bf16', [T, hidden], ctx), positions: b.tensor('i32', [T], positions), slots: b.tensor('i32', [T], slots) };
        made.push(kPool, vPool, ...Object.values(inputs));
        m.materializeInto({ ...inputs, kPool, vPool });
        return vPool;
      };
      try {
        const whole = run(one, 0, H);
        const shards = shardBackends.map((b, r) => run(b, (r * H) / tp, ((r + 1) * H) / tp));
        const want = (await one.read(whole)) as Float32Array;
        const wantBits = (await one.readBits(whole)) as Bits;
        const exact: boolean[] = [];
        for (const [r, pool] of shards.entries()) {
          const [from, to] = [(r * H) / tp, ((r + 1) * H) / tp];
          expectMatch(`rank ${r}: vPool`, (await shardBackends[r]!.read(pool)) as Float32Array, headSlice(want, H, D, from, to), RELATIVE_TOLERANCE.bf16);
          exact.push(firstDifference((await shardBackends[r]!.readBits(pool)) as Bits, headSlice(wantBits, H, D, from, to)) < 0);
        }
        console.log(`kernels-cuda: cuBLASLt shards bit for bit the one-device projection: ${exact.map((e, r) => `rank ${r} ${e ? 'yes' : 'no'}`).join(', ')}`);
      } finally {
        for (const m of ms) m.dispose();
        for (const t of made) t.dispose();
        for (const b of lt) b.dispose();
      }
    }, 120_000);

    it('the ranks run at once: every rank enqueued before any syncs takes under 1.6x the time of one rank alone', async () => {
      if (!distinct || process.env.KVKIT_SANITIZER) {
        console.log(`kernels-cuda: rank overlap not timed: ${!distinct ? 'ranks share a device' : 'compute-sanitizer serialises the devices'}`);
        return;
      }
      // A prefill step of each rank: T tokens through a 4-layer projection of its heads (about 1 ms on an H200), then its pools.
      const dims = { L: 4, H: 8, D: 128, hidden: 4096 };
      const [T, S, steps] = [4096, 4096, 30];
      const { L, H, D, hidden } = dims;
      const weight = values(L * 2 * H * D * hidden, 71, 0.02);
      const made: Tensor[] = [];
      const work = ranks.map((b, r) => {
        const [from, to] = [(r * H) / tp, ((r + 1) * H) / tp];
        const m = materializer(b, dims, weight, from, to);
        const args = {
          ctxHidden: b.tensor('bf16', [T, hidden], values(T * hidden, 72)),
          positions: b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t)),
          slots: b.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t)),
          kPool: b.empty('bf16', [L, S, to - from, D]),
          vPool: b.empty('bf16', [L, S, to - from, D]),
        };
        made.push(...Object.values(args));
        return { b, m, step: () => m.materializeInto(args) };
      });
      const timed = async (active: typeof work) => {
        const started = performance.now();
        for (let s = 0; s < steps; s++) for (const w of active) w.step();
        await Promise.all(active.map((w) => w.b.sync()));
        return performance.now() - started;
      };
      try {
        for (const w of work) w.step();
        await Promise.all(work.map((w) => w.b.sync()));
        let alone = Infinity;
        let together = Infinity;
        for (let round = 0; round < 3; round++) {
          alone = Math.min(alone, await timed(work.slice(0, 1)));
          together = Math.min(together, await timed(work));
        }
        console.log(`kernels-cuda: ${steps} steps on rank 0 alone ${alone.toFixed(1)} ms, on all ${tp} ranks at once ${together.toFixed(1)} ms (${(together / alone).toFixed(2)}x)`);
        check(together < 1.6 * alone, `${tp} ranks took ${together.toFixed(1)} ms, ${(together / alone).toFixed(2)}x one rank's ${alone.toFixed(1)} ms: the devices did not run at once`);
      } finally {
        for (const w of work) w.m.dispose();
        for (const t of made) t.dispose();
      }
    }, 300_000);
  });
}
