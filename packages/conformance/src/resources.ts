import type { Backend, Tensor } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { FIXTURE, Fixture, VALID } from './fixture.js';
import { randomValues, Rng } from './data.js';
import { readFloats, untyped } from './tensors.js';

export interface ResourceOptions {
  /** Calls of each op in the loop tests: 10 000 unless `KVKIT_RESOURCE_ITERATIONS` says otherwise or a slow device asks for fewer. */
  readonly iterations?: number;
  /** Why `iterations` is below 10 000, printed with the count. */
  readonly fewerBecause?: string;
  /** Buffers the backend holds now (live device buffers, or allocations made so far): must not grow in a steady-state loop. */
  readonly buffers?: (backend: Backend) => number;
  /** Whether `buffers` counts live buffers (a disposed output lowers it) or allocations made so far (it only grows). */
  readonly buffersAreLive?: boolean;
  /** Why the process's RSS is not bounded in this run (a tool that keeps its own state in the process); the JS heap and `buffers` still are. */
  readonly rssUnboundedBecause?: string;
}

const DEFAULT_ITERATIONS = 10_000;
const LOOP_TIMEOUT_MS = 600_000;
/** Heap and RSS growth allowed over the second half of a loop: generous, a leak of one buffer per call is far more. */
const GROWTH_BOUND_BYTES = 48 * 2 ** 20;

const { T, L, H, D, N, hidden } = FIXTURE;

/**
 * Resource safety on one backend: every op called many times in a loop holds
 * the backend's buffer count flat and the process's memory bounded (outputs
 * disposed each call, caller-owned and reused, or dropped undisposed and
 * collected: those loops need `global.gc`, node's `--expose-gc`, which
 * vitest.shared.ts and tools/device pass); two materializers and other
 * ops interleaved give the same bytes as each run alone; dispose() of tensors,
 * materializers and backends may be called twice.
 */
export function defineResourceSuite(name: string, create: () => Backend | Promise<Backend>, options: ResourceOptions = {}): void {
  const fromEnv = Number(process.env.KVKIT_RESOURCE_ITERATIONS);
  const iterations = Number.isSafeInteger(fromEnv) && fromEnv > 0 ? fromEnv : (options.iterations ?? DEFAULT_ITERATIONS);
  if (iterations < DEFAULT_ITERATIONS) {
    console.log(`${name}: resource loops run ${iterations} calls of each op, not ${DEFAULT_ITERATIONS}${options.fewerBecause ? ` (${options.fewerBecause})` : ''}; set KVKIT_RESOURCE_ITERATIONS to raise it`);
  }
  if (options.rssUnboundedBecause) console.log(`${name}: resource loops do not bound RSS in this run (${options.rssUnboundedBecause}); the JS heap and buffer counts are still bounded`);

  describe(`${name}: resources`, () => {
    let backend: Backend | undefined;
    let fx: Fixture | undefined;
    let other: Backend | undefined;
    const ready = (): [Backend, Fixture] => {
      if (!backend || !fx) throw new Error(`the ${name} backend was not created (see the beforeAll error)`);
      return [backend, fx];
    };
    beforeAll(async () => {
      backend = await create();
      other = createCpuBackend();
      fx = new Fixture(backend, other);
    }, 60_000);
    afterAll(() => {
      fx?.dispose();
      backend?.dispose();
      other?.dispose();
    });

    // `allocates`: each call makes (and frees) new tensors, so a count of allocations made so far grows by design.
    // `drops`: outputs are never disposed, so only the collector's backstop frees them. `settledByRead`: no sync at all.
    const loops: { op: string; allocates?: boolean; drops?: boolean; settledByRead?: boolean; call: (fx: Fixture) => void }[] = [
      {
        op: 'fusedNormRopeStacked, outputs disposed each call',
        allocates: true,
        call: (f) => {
          const { kOut, vOut } = untyped(f.backend).fusedNormRopeStacked(f.fusedArgs({ kOut: undefined, vOut: undefined }));
          kOut.dispose();
          vOut.dispose();
        },
      },
      { op: 'fusedNormRopeStacked into caller-owned outputs', call: (f) => untyped(f.backend).fusedNormRopeStacked(f.fusedArgs()) },
      {
        op: 'ropePoolFused, outputs disposed each call',
        allocates: true,
        call: (f) => {
          const { qRot, kRot } = untyped(f.backend).ropePoolFused(f.ropeArgs());
          qRot.dispose();
          kRot.dispose();
        },
      },
      {
        op: 'mlaPoolFused, qRot disposed each call',
        allocates: true,
        call: (f) => (f.backend.mlaPoolFused as (a: unknown) => { qRot?: { dispose(): void } })(f.mlaArgs()).qRot?.dispose(),
      },
      { op: 'dequantizeKv into caller-owned rows', call: (f) => untyped(f.backend).dequantizeKv({ pool: f.kPool, slots: f.slots, rows: f.poolRows }) },
      { op: 'KvMaterializer.materialize', call: (f) => f.materializer.materialize({ ctxHidden: f.ctxHidden, positions: f.positions4, writeLayerKv: () => {} }) },
      { op: 'KvMaterializer.materializeInto', call: (f) => f.materializer.materializeInto(f.intoArgs()) },
      {
        op: 'tensor() and read(), disposed each call',
        allocates: true,
        call: (f) => {
          const t = f.backend.tensor('f32', [T, hidden], randomValues(new Rng(7), T * hidden));
          void f.backend.read(t);
          t.dispose();
        },
      },
      {
        op: 'fusedNormRopeStacked, outputs dropped',
        allocates: true,
        drops: true,
        call: (f) => void untyped(f.backend).fusedNormRopeStacked(f.fusedArgs({ kOut: undefined, vOut: undefined })),
      },
      { op: 'ropePoolFused, outputs dropped', allocates: true, drops: true, call: (f) => void untyped(f.backend).ropePoolFused(f.ropeArgs()) },
      {
        op: 'tensor() and read(), dropped',
        allocates: true,
        drops: true,
        call: (f) => void f.backend.read(f.backend.tensor('f32', [T, hidden], randomValues(new Rng(7), T * hidden))),
      },
      {
        // The value checks of each call hold its positions and slots until a read() or sync() settles them.
        op: 'ropePoolFused on fresh positions and slots, all dropped, settled by read() alone',
        allocates: true,
        drops: true,
        settledByRead: true,
        call: (f) => {
          const positions = f.backend.tensor('i32', [N], VALID.ropePositions);
          const slots = f.backend.tensor('i64', [N], VALID.slots);
          untyped(f.backend).ropePoolFused(f.ropeArgs({ positions, slots }));
        },
      },
    ];

    for (const loop of loops) {
      it(
        `${iterations} calls: ${loop.op} hold buffers flat and memory bounded`,
        async () => {
          const [b, f] = ready();
          if (loop.drops) check(typeof gcOf() === 'function', `${loop.op}: needs global.gc to collect the dropped tensors: run node with --expose-gc`);
          const syncEvery = 100;
          // A full collection costs milliseconds: one every thousand calls leaves a bounded pile of dropped tensors between.
          const collectEvery = 1000;
          const settle = async (collect: boolean) => {
            if (loop.drops && collect) await collectGarbage();
            if (loop.settledByRead) await b.read(f.eps);
            else await b.sync();
          };
          const run = async (count: number) => {
            for (let i = 0; i < count; i++) {
              loop.call(f);
              if ((i + 1) % syncEvery === 0) await settle((i + 1) % collectEvery === 0);
            }
            await settle(true);
          };
          // Finalizers of dropped tensors run some turns after a collection, and their buffers go back once the device is
          // done with them: settle until the count holds still, so a release still on its way is not counted as held.
          // A leak still shows: it holds more at the end than halfway, however long one waits.
          const settled = async () => {
            let last = await snapshot(b, options);
            for (let round = 0; loop.drops && round < SETTLE_ROUNDS; round++) {
              await settle(true);
              const now = await snapshot(b, options);
              if (now.buffers === last.buffers) return now;
              last = now;
            }
            return last;
          };
          const half = Math.max(syncEvery, Math.floor(iterations / 2));
          await run(Math.min(half, 200)); // warm-up: pipelines, workspaces, pools of recycled buffers
          const atStart = await settled();
          await run(half);
          const atHalf = await settled();
          await run(half);
          const atEnd = await settled();
          if (options.buffers && (options.buffersAreLive || !loop.allocates)) {
            // Flat over the second half (recycling pools have settled by then), and no more than after warm-up where counts are live.
            const counts = `${loop.op}: buffers after warm-up ${atStart.buffers}, halfway ${atHalf.buffers}, at the end ${atEnd.buffers}`;
            check(atEnd.buffers === atHalf.buffers, counts);
            if (options.buffersAreLive) check(atEnd.buffers <= atStart.buffers, counts);
          }
          const heapGrowth = atEnd.heap - atHalf.heap;
          const rssGrowth = atEnd.rss - atHalf.rss;
          check(heapGrowth < GROWTH_BOUND_BYTES, `${loop.op}: JS heap grew ${heapGrowth} bytes over the second ${half} calls`);
          if (!options.rssUnboundedBecause) check(rssGrowth < GROWTH_BOUND_BYTES, `${loop.op}: RSS grew ${rssGrowth} bytes over the second ${half} calls`);
        },
        LOOP_TIMEOUT_MS,
      );
    }

    it('two materializers and other ops interleaved give the same bytes as each run alone', async () => {
      const [b, f] = ready();
      const second = untyped(b).createKvMaterializer(f.createArgs({ kvWeight: f.float('f32', [L, 2 * H * D, hidden]), cosSinCache: undefined, ropeBase: 5000 }));
      try {
        const first = f.materializer;
        const ctx = [f.ctxHidden, f.float('f32', [T, hidden])];
        const collect = async (m: typeof first, ctxHidden: Tensor) => {
          const reads: Promise<Float32Array>[] = [];
          m.materialize({ ctxHidden, positions: f.positions4, writeLayerKv: (_: number, k: Tensor, v: Tensor) => reads.push(readFloats(b, k), readFloats(b, v)) });
          return Promise.all(reads);
        };
        const fused = async () => {
          const { kOut, vOut } = untyped(b).fusedNormRopeStacked(f.fusedArgs({ kOut: undefined, vOut: undefined }));
          const out = await Promise.all([readFloats(b, kOut), readFloats(b, vOut)]);
          kOut.dispose();
          vOut.dispose();
          return out;
        };
        const alone = [await collect(first, ctx[0]!), await collect(second, ctx[1]!), await fused()];
        // Interleaved: calls of both materializers and the op enqueued before any result is read.
        const reads = [collect(first, ctx[0]!), collect(second, ctx[1]!), fused(), collect(first, ctx[0]!)];
        const mixed = await Promise.all(reads);
        for (const [i, want] of [alone[0], alone[1], alone[2], alone[0]].entries()) {
          const got = mixed[i]!;
          check(got.length === want!.length, `result ${i}: ${got.length} tensors, alone ${want!.length}`);
          for (const [j, a] of got.entries()) check(sameBytes(bytesOf(a), bytesOf(want![j]!)), `result ${i}, tensor ${j}: bytes differ from the call run alone`);
        }
      } finally {
        second.dispose();
      }
    });

    it('dispose() of a tensor, a materializer and a backend is a no-op the second time', async () => {
      const [b, f] = ready();
      const t = b.tensor('f32', [3], [1, 2, 3]);
      t.dispose();
      t.dispose();
      check(t.disposed, 'the tensor reads as disposed');
      const m = untyped(b).createKvMaterializer(f.createArgs());
      m.dispose();
      m.dispose();
      const fresh = await create();
      const kept = fresh.tensor('f32', [2], [1, 2]);
      fresh.dispose();
      fresh.dispose();
      kept.dispose();
      check(kept.disposed, "a disposed backend's tensor reads as disposed");
      // The backend under test is untouched by another's disposal.
      check((await b.read(f.eps)).length === L, 'the backend under test still reads');
    });
  });
}

const gcOf = () => (globalThis as { gc?: () => void }).gc;

/** A full collection where `gc` is exposed, then two turns of the event loop, in which finalizers of collected tensors run. */
/** Collections at most before a snapshot of a loop that drops its tensors. */
const SETTLE_ROUNDS = 5;

async function collectGarbage(): Promise<void> {
  gcOf()?.();
  for (let turn = 0; turn < 2; turn++) await new Promise((resolve) => setTimeout(resolve, 0));
}

async function snapshot(backend: Backend, options: ResourceOptions): Promise<{ buffers: number; heap: number; rss: number }> {
  await collectGarbage();
  const memory = process.memoryUsage();
  return { buffers: options.buffers?.(backend) ?? 0, heap: memory.heapUsed, rss: memory.rss };
}

const bytesOf = (a: Float32Array) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);

/** Runs under node:test on the GPU host too, where Vitest's expect is not there. */
function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
