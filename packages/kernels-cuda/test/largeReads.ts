/**
 * read() and readBits() of results past 4 GiB: [1100000, 8, 128] pools
 * (bf16: 2.25 GB stored, 4.5 GB read as f32; f32: 4.5 GB both ways;
 * fp8e4m3: 1.1 GB stored, 4.5 GB read), written by ropePoolFused at slots on
 * both sides of row 2^20, where the f32 result passes 4 GiB, and read whole.
 * A tensor of more than 2^32 elements cannot come back in one typed array:
 * KV045, naming the host, and views of it read. Written against
 * describe/it/beforeAll/afterAll only, for the device bundle. About 10 GB of
 * device memory and 10 GB of host memory at the peak.
 */
import type { Backend, Tensor } from '@kvkit/contracts';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { untyped, values } from './checkSupport.js';

type Bits = Uint8Array | Uint16Array | Uint32Array;

/** The first index of `row` elements at `at` in `a` that differs from `expected`'s row `n`, or -1. */
function rowDifference(a: Bits | Float32Array, at: number, expected: Bits | Float32Array, n: number, row: number): number {
  const x = a instanceof Float32Array ? new Uint32Array(a.buffer, a.byteOffset + at * row * 4, row) : a.subarray(at * row, (at + 1) * row);
  const y = expected instanceof Float32Array ? new Uint32Array(expected.buffer, expected.byteOffset + n * row * 4, row) : expected.subarray(n * row, (n + 1) * row);
  return x.findIndex((v, i) => v !== y[i]);
}

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

export function defineLargeReadChecks(create: () => Promise<Backend>): void {
  describe('cuda: reads past 4 GiB', () => {
    let b: Backend | undefined;
    beforeAll(async () => {
      b = await create();
    }, 60_000);
    afterAll(() => b?.dispose());

    for (const dtype of ['bf16', 'f32', 'fp8e4m3'] as const) {
      it(`read and readBits of a [1100000, 8, 128] ${dtype} pool: every row written, before and past the result's 4 GiB mark, and rows between them zero [${dtype}]`, async () => {
        const [S, H, D] = [1_100_000, 8, 128];
        const row = H * D;
        // Row 2^20 starts 4 GiB into an f32 result; S - 1 is the last.
        const slots = [0, 7, 2 ** 19, 2 ** 20 - 1, 2 ** 20, 2 ** 20 + 12_345, S - 1];
        const N = slots.length;
        const model = dtype === 'fp8e4m3' ? 'bf16' : dtype;
        const be = b!;
        const scales = dtype === 'fp8e4m3' ? { kScale: be.tensor('f32', [1], [0.05]), vScale: be.tensor('f32', [1], [0.01]) } : {};
        const inputs = {
          q: be.tensor(model, [N, H, D], values(N * row, 31)),
          k: be.tensor(model, [N, H, D], values(N * row, 32)),
          v: be.tensor(model, [N, H, D], values(N * row, 33)),
          positions: be.tensor('i32', [N], Int32Array.from(slots, (_, n) => 100 * n)),
          numQoHeads: H,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10_000,
          ...scales,
        };
        // The same tokens into an [N, H, D] pool, token n at slot n: the rows the large pool must hold.
        const small = { kPool: be.empty(dtype, [N, H, D]), vPool: be.empty(dtype, [N, H, D]) };
        const large = { kPool: be.empty(dtype, [S, H, D]), vPool: be.empty(dtype, [S, H, D]) };
        const made: Tensor[] = [...Object.values(scales), inputs.q, inputs.k, inputs.v, inputs.positions, ...Object.values(small), ...Object.values(large)];
        try {
          for (const [pools, at] of [
            [small, Int32Array.from(slots, (_, n) => n)],
            [large, Int32Array.from(slots)],
          ] as const) {
            const out = untyped(be).ropePoolFused({ ...inputs, ...pools, slots: be.tensor('i32', [N], at) });
            made.push(out.qRot, out.kRot);
          }
          await be.sync();
          const [wantBits, wantValues] = [await be.readBits(small.vPool), await be.read(small.vPool)];
          large.kPool.dispose(); // room on the host for two 4.5 GB results
          for (const form of ['bits', 'values'] as const) {
            const started = performance.now();
            const got = form === 'bits' ? await be.readBits(large.vPool) : await be.read(large.vPool);
            const ms = performance.now() - started;
            check(got.length === S * row, `${form}: ${got.length} elements, expected ${S * row}`);
            const want = form === 'bits' ? wantBits : wantValues;
            for (const [n, slot] of slots.entries()) {
              const at = rowDifference(got, slot, want, n, row);
              check(at < 0, `${form}: row ${slot} (byte ${slot * row * got.BYTES_PER_ELEMENT} of the result) differs from token ${n}'s at element ${at}`);
            }
            for (const slot of [1, 2 ** 19 + 1, 2 ** 20 + 1, S - 2]) {
              const rest = got.subarray(slot * row, (slot + 1) * row);
              check(rest.every((x: number) => x === 0), `${form}: row ${slot}, written by no token, is not zero`);
            }
            console.log(`cuda: ${form === 'bits' ? 'readBits' : 'read'} of a [${S}, ${H}, ${D}] ${dtype} pool: ${(got.byteLength / 1e9).toFixed(2)} GB in ${ms.toFixed(0)} ms`);
          }
        } finally {
          for (const t of made) t.dispose();
        }
      }, 300_000);
    }

    it('read and readBits of more than 2^32 elements reject with KV045 naming the host, before copying; views of it read', async () => {
      const be = b!;
      const t = be.empty('fp8e4m3', [2 ** 22 + 1, 1024]);
      try {
        for (const [op, read] of [
          ['read', () => be.read(t)],
          ['readBits', () => be.readBits(t)],
        ] as const) {
          const e = (await read().then(
            () => undefined,
            (x: unknown) => x,
          )) as { code?: string; message?: string } | undefined;
          check(e?.code === 'KV045', `${op}: expected KV045; got ${e?.message ?? 'no error'}`);
          check(e!.message!.includes('is more than the host holds in one: at most 4294967296 elements'), `${op}: ${e!.message}`);
        }
        // The way out the message names: a view, here the last 1024 rows, read as any tensor is.
        const last = be.view(t, [1024, 1024], { offset: (2 ** 22 + 1 - 1024) * 1024 });
        const data = await be.read(last);
        check(data.length === 2 ** 20 && data.every((x) => x === 0), 'the last 1024 rows, read as a view, are not 2^20 zeros');
      } finally {
        t.dispose();
      }
    }, 300_000);
  });
}
