/**
 * Pools past 2^31 elements (KV045 on this backend is the device's memory, not
 * 32-bit indexing): an [L=4, S=600000, H=8, D=128] bf16 pool for
 * materializeInto and [1100000, 8, 128] pools for ropePoolFused, written at
 * slots near the end and at slots whose element offset is past 2^31, with a
 * contested slot among them. Only the rows written are copied out (on the
 * device) and read; they are compared bit for bit with the backend's own
 * small outputs and within tolerance with the CPU reference. Written against
 * describe/it/beforeAll/afterAll only, like cudaChecks.ts, for the device
 * bundle. About 20 GB of device memory at the peak.
 */
import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { expectMatch, RELATIVE_TOLERANCE, ropeBaseTolerance } from '@kvkit/conformance';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { CudaTensor } from '../src/runtime/cudaTensor.js';
import { ELEMENT_BYTES } from '../src/runtime/cudaTensor.js';
import { cudaKernelsOf } from '../src/runtime/registry.js';
import { untyped, values } from './checkSupport.js';

/** Rows `rows` (each `rowElements` long) of a device tensor, copied into a small tensor on the device and read. */
async function readRows(b: Backend, t: Tensor, rows: readonly number[], rowElements: number): Promise<Float32Array> {
  const k = cudaKernelsOf(b, 'readRows');
  const out = b.empty(t.dtype, [rows.length, rowElements]);
  const rowBytes = rowElements * ELEMENT_BYTES[t.dtype];
  k.cx.makeCurrent();
  const ptr = (x: Tensor) => (x as unknown as CudaTensor).ptr;
  for (const [i, row] of rows.entries()) k.cx.copy(ptr(out) + i * rowBytes, ptr(t) + row * rowBytes, rowBytes, 'readRows');
  const data = (await b.read(out)) as Float32Array;
  out.dispose();
  return data;
}

/** Token t's rows [t*rowElements, (t+1)*rowElements) of a small host array, for each token. */
const tokenRows = (data: Float32Array, tokens: readonly number[], rowElements: number) => {
  const out = new Float32Array(tokens.length * rowElements);
  for (const [i, t] of tokens.entries()) out.set(data.subarray(t * rowElements, (t + 1) * rowElements), i * rowElements);
  return out;
};

export function defineLargePoolChecks(create: () => Promise<Backend>): void {
  describe('cuda: pools past 2^31 elements', () => {
    let b: Backend | undefined;
    let cpu: Backend | undefined;
    beforeAll(async () => {
      b = await create();
      cpu = createCpuBackend();
    }, 60_000);
    afterAll(() => {
      b?.dispose();
      cpu?.dispose();
    });

    it('refuses only a tensor larger than the device memory, and says so (KV045)', () => {
      let message = '';
      try {
        b!.empty('bf16', [2 ** 40]);
      } catch (e) {
        message = (e as Error).message;
      }
      if (!message.startsWith('[KV045]') || !message.includes("64-bit element indexing, so the device's memory")) throw new Error(`expected KV045 naming the device memory; got ${message || 'no error'}`);
    });

    it('materializeInto an [4, 600000, 8, 128] bf16 pool: rows past element 2^31 are the tokens\' rows', async () => {
      const [L, S, H, D, hidden] = [4, 600_000, 8, 128, 64];
      const row = H * D;
      // Token 2 names slot S-1 after token 0: it owns it. Layer 3 of slots S-1 and 400000 lies past element 2^31.
      const slots = [S - 1, 400_000, S - 1, 5];
      const T = slots.length;
      const made = (be: Backend) => {
        const m = untyped(be).createKvMaterializer({
          kvWeight: be.tensor('bf16', [L, 2 * row, hidden], values(L * 2 * row * hidden, 1, 0.1)),
          kNormWeight: be.tensor('f32', [L, D], values(L * D, 2).map((x) => 1 + 0.1 * x)),
          eps: 1e-6,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        });
        const ctx = be.tensor('bf16', [T, hidden], values(T * hidden, 3));
        const positions = be.tensor('i64', [T], BigInt64Array.from([7n, 1000n, 4095n, 0n]));
        const layers: Promise<[Float32Array, Float32Array]>[] = [];
        m.materialize({ ctxHidden: ctx, positions, writeLayerKv: (_l: number, k: Tensor, v: Tensor) => layers.push(Promise.all([be.read(k), be.read(v)]) as Promise<[Float32Array, Float32Array]>) });
        return { m, ctx, positions, layers };
      };
      const gpu = made(b!);
      const ref = made(cpu!);
      const kPool = b!.empty('bf16', [L, S, H, D]);
      const vPool = b!.empty('bf16', [L, S, H, D]);
      try {
        gpu.m.materializeInto({ ctxHidden: gpu.ctx, positions: gpu.positions, kPool, vPool, slots: b!.tensor('i32', [T], Int32Array.from(slots)) });
        await b!.sync();
        const owners = [1, 2, 3]; // slot 400000, S-1, 5
        const written = owners.map((t) => slots[t]!);
        for (let l = 0; l < L; l++) {
          const poolRows = written.map((slot) => l * S + slot);
          const [kRows, vRows] = await Promise.all([readRows(b!, kPool, poolRows, row), readRows(b!, vPool, poolRows, row)]);
          const [[kView, vView], [kRef, vRef]] = await Promise.all([gpu.layers[l]!, ref.layers[l]!]);
          expectMatch(`layer ${l}: kPool rows vs materialize`, kRows, tokenRows(kView, owners, row), 'bit-exact');
          expectMatch(`layer ${l}: vPool rows vs materialize`, vRows, tokenRows(vView, owners, row), 'bit-exact');
          expectMatch(`layer ${l}: kPool rows vs CPU reference`, kRows, tokenRows(kRef, owners, row), RELATIVE_TOLERANCE.bf16);
          expectMatch(`layer ${l}: vPool rows vs CPU reference`, vRows, tokenRows(vRef, owners, row), RELATIVE_TOLERANCE.bf16);
        }
        // A slot no token named is still zero, at the very end of the pool's last layer too.
        const untouched = await readRows(b!, kPool, [(L - 1) * S + S - 2], row);
        if (!untouched.every((x) => x === 0)) throw new Error('kPool row S-2 of the last layer was written');
      } finally {
        kPool.dispose();
        vPool.dispose();
        gpu.m.dispose();
        ref.m.dispose();
      }
    }, 300_000);

    for (const dtype of ['bf16', 'f32'] as const satisfies readonly FloatDType[]) {
      it(`ropePoolFused into [1100000, 8, 128] ${dtype} pools: rows past 2^31 bytes are kRot and v [${dtype}]`, async () => {
        const [S, H, D] = [1_100_000, 8, 128];
        const row = H * D;
        const slots = [S - 1, 2 ** 20, S - 1, 7, 2 ** 20 + 12_345];
        const N = slots.length;
        const inputs = (be: Backend) => ({
          q: be.tensor(dtype, [N, H, D], values(N * row, 11)),
          k: be.tensor(dtype, [N, H, D], values(N * row, 12)),
          v: be.tensor(dtype, [N, H, D], values(N * row, 13)),
          positions: be.tensor('i32', [N], Int32Array.from([3, 900, 17, 0, 65_000])),
          numQoHeads: H,
          numKvHeads: H,
          headDim: D,
          ropeBase: 500_000,
        });
        const gpuIn = inputs(b!);
        const kPool = b!.empty(dtype, [S, H, D]);
        const vPool = b!.empty(dtype, [S, H, D]);
        try {
          const out = untyped(b!).ropePoolFused({ ...gpuIn, slots: b!.tensor('i64', [N], BigInt64Array.from(slots, (slot) => BigInt(slot))), kPool, vPool });
          const refIn = inputs(cpu!);
          const refOut = untyped(cpu!).ropePoolFused({ ...refIn, slots: cpu!.tensor('i32', [N], Int32Array.from(slots, () => -1)), kPool: cpu!.empty(dtype, [1, H, D]), vPool: cpu!.empty(dtype, [1, H, D]) });
          await b!.sync();
          const owners = [1, 2, 3, 4]; // slot 2^20, S-1 (token 2 after token 0), 7, 2^20 + 12345
          const written = owners.map((t) => slots[t]!);
          const [kRows, vRows, kRot, vIn, kRef] = await Promise.all([
            readRows(b!, kPool, written, row),
            readRows(b!, vPool, written, row),
            b!.read(out.kRot) as Promise<Float32Array>,
            b!.read(gpuIn.v) as Promise<Float32Array>,
            cpu!.read(refOut.kRot) as Promise<Float32Array>,
          ]);
          expectMatch('kPool rows vs kRot of their tokens', kRows, tokenRows(kRot, owners, row), 'bit-exact');
          expectMatch('vPool rows vs v of their tokens', vRows, tokenRows(vIn, owners, row), 'bit-exact');
          expectMatch('kPool rows vs the CPU reference kRot', kRows, tokenRows(kRef, owners, row), ropeBaseTolerance(dtype, 65_000));
        } finally {
          kPool.dispose();
          vPool.dispose();
        }
      }, 300_000);
    }
  });
}
