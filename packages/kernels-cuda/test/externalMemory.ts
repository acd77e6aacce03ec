/**
 * kvkit on an application's memory and stream: wrapped tensors give the same
 * bits as owned ones, their dispose leaves the memory to the application, and
 * work on the application's stream is ordered with its own. describe/it and
 * the hooks only, so the device bundle runs these under node:test.
 */
import { isContractError } from '@kvkit/contracts';
import type { Backend, DType, FloatDType, Shape, Tensor } from '@kvkit/contracts';
import { encodeTensorData, storageView } from '@kvkit/contracts/backend';
import koffi from 'koffi';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createCudaBackend, streamOf, wrapDeviceMemory } from '../src/index.js';
import { ELEMENT_BYTES } from '../src/runtime/cudaTensor.js';
import { ApplicationCuda } from './applicationCuda.js';
import { untyped, values, withTuning } from './checkSupport.js';

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

const sameBytes = (a: Uint8Array, b: Uint8Array) => a.length === b.length && a.every((x, i) => x === b[i]);
const bytesOf = (a: ArrayBufferView) => new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
const DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];

/** Host data as kvkit stores it: the bytes an application holds for the same values. */
function stored(dtype: DType, data: ArrayLike<number>): Uint8Array {
  const out = storageView(dtype, new ArrayBuffer(data.length * ELEMENT_BYTES[dtype]), data.length);
  encodeTensorData(dtype, data as Float32Array, out);
  return bytesOf(out);
}

/** The same tensors twice: owned (`tensor()`) and in application memory (`wrapDeviceMemory`), from the same values. */
class Twins {
  readonly owned: Tensor[] = [];
  readonly wrapped: Tensor[] = [];
  readonly ptrs: bigint[] = [];

  constructor(
    readonly b: Backend,
    readonly app: ApplicationCuda,
  ) {}

  make(dtype: DType, shape: Shape, data: ArrayLike<number>): [Tensor, Tensor, bigint] {
    const bytes = stored(dtype, data);
    const owned = this.b.tensor(dtype, shape, data as Float32Array);
    // One spare element after the view: a kernel writing past the shape would show there.
    const ptr = this.app.alloc(bytes.byteLength + 16);
    this.app.fill(ptr, 0x5a, bytes.byteLength + 16);
    this.app.upload(ptr, bytes);
    this.app.synchronize();
    const wrapped = wrapDeviceMemory(this.b, ptr, dtype, shape);
    this.owned.push(owned);
    this.wrapped.push(wrapped);
    this.ptrs.push(ptr);
    return [owned, wrapped, ptr];
  }

  dispose(): void {
    for (const t of [...this.owned, ...this.wrapped]) t.dispose();
    for (const p of this.ptrs) this.app.free(p);
  }
}

async function readBytes(b: Backend, t: Tensor): Promise<Uint8Array> {
  const got = await b.read(t);
  return stored(t.dtype, got as Float32Array);
}

export function defineExternalMemoryChecks(): void {
  describe('cuda: application memory and streams', () => {
    let app: ApplicationCuda | undefined;
    let b: Backend | undefined;
    beforeAll(async () => {
      app = new ApplicationCuda();
      b = await createCudaBackend();
    }, 60_000);
    afterAll(() => {
      b?.dispose();
      app?.close();
    });

    for (const dtype of DTYPES) {
      it(`ropePoolFused on wrapped q, k, v, indices and pools gives the owned tensors' bits; contested slots [${dtype}]`, async () => {
        const [N, Hq, H, D, S] = [13, 6, 2, 40, 7]; // three query heads per KV head
        const t = new Twins(b!, app!);
        const [q, qW] = t.make(dtype, [N, Hq, D], values(N * Hq * D, 1));
        const [k, kW] = t.make(dtype, [N, H, D], values(N * H * D, 2));
        const [v, vW] = t.make(dtype, [N, H, D], values(N * H * D, 3));
        const [positions, positionsW] = t.make('i32', [N], Int32Array.from({ length: N }, (_, n) => (n * 7) % 31));
        const [slots, slotsW] = t.make('i32', [N], Int32Array.from({ length: N }, (_, n) => (n % 4 === 3 ? -1 : n % 5)));
        const [kPool, kPoolW, kPoolPtr] = t.make(dtype, [S, H, D], values(S * H * D, 4));
        const [vPool, vPoolW, vPoolPtr] = t.make(dtype, [S, H, D], values(S * H * D, 5));
        const common = { numQoHeads: Hq, numKvHeads: H, headDim: D, rotaryDim: 24, ropeBase: 10000 };
        const own = untyped(b!).ropePoolFused({ q, k, v, positions, slots, kPool, vPool, ...common });
        const wrapped = untyped(b!).ropePoolFused({ q: qW, k: kW, v: vW, positions: positionsW, slots: slotsW, kPool: kPoolW, vPool: vPoolW, ...common });
        await b!.sync();
        for (const [name, a, w] of [['qRot', own.qRot, wrapped.qRot], ['kRot', own.kRot, wrapped.kRot], ['kPool', kPool, kPoolW], ['vPool', vPool, vPoolW]] as const) {
          check(sameBytes(await readBytes(b!, a), await readBytes(b!, w)), `${name}: wrapped and owned differ`);
        }
        // The application reads its pools with its own copies; the spare bytes after each view are untouched.
        const poolBytes = S * H * D * ELEMENT_BYTES[dtype];
        for (const [name, owned, ptr] of [['kPool', kPool, kPoolPtr], ['vPool', vPool, vPoolPtr]] as const) {
          const mine = app!.download(ptr, poolBytes + 16);
          check(sameBytes(mine.subarray(0, poolBytes), await readBytes(b!, owned)), `${name}: the application's copy differs from kvkit's result`);
          check(mine.subarray(poolBytes).every((x) => x === 0x5a), `${name}: bytes past the view were written`);
        }
        for (const out of [own.qRot, own.kRot, wrapped.qRot, wrapped.kRot]) out.dispose();
        t.dispose();
      }, 60_000);

      it(`fusedNormRopeStacked on wrapped inputs into wrapped kOut and vOut gives the owned tensors' bits [${dtype}]`, async () => {
        const [T, L, H, D, R, P] = [11, 3, 2, 48, 32, 29];
        const t = new Twins(b!, app!);
        const [kv, kvW] = t.make(dtype, [T, L, 2 * H * D], values(T * L * 2 * H * D, 6));
        const [weight, weightW] = t.make('f32', [L, D], values(L * D, 7).map((x) => 1 + 0.2 * x));
        const [eps, epsW] = t.make('f32', [L], [1e-6, 1e-5, 3e-6]);
        const [cache, cacheW] = t.make(dtype, [P, R], values(P * R, 8));
        const [positions, positionsW] = t.make('i32', [T], Int32Array.from({ length: T }, (_, n) => (n * 5) % P));
        const [, kOutW, kOutPtr] = t.make(dtype, [L, T, H, D], values(L * T * H * D, 9));
        const [, vOutW] = t.make(dtype, [L, T, H, D], values(L * T * H * D, 10));
        const common = { numKvHeads: H, headDim: D, rotaryDim: R };
        const own = untyped(b!).fusedNormRopeStacked({ kv, kNormWeight: weight, eps, cosSinCache: cache, positions, ...common });
        const wrapped = untyped(b!).fusedNormRopeStacked({ kv: kvW, kNormWeight: weightW, eps: epsW, cosSinCache: cacheW, positions: positionsW, kOut: kOutW, vOut: vOutW, ...common });
        await b!.sync();
        check(wrapped.kOut === kOutW && wrapped.vOut === vOutW, 'the wrapped outputs were not the ones returned');
        check(sameBytes(await readBytes(b!, own.kOut), await readBytes(b!, kOutW)), 'kOut: wrapped and owned differ');
        check(sameBytes(await readBytes(b!, own.vOut), await readBytes(b!, vOutW)), 'vOut: wrapped and owned differ');
        const outBytes = L * T * H * D * ELEMENT_BYTES[dtype];
        check(sameBytes(app!.download(kOutPtr, outBytes), await readBytes(b!, own.kOut)), "kOut: the application's copy differs");
        own.kOut.dispose();
        own.vOut.dispose();
        t.dispose();
      }, 60_000);
    }

    it("a wrapped tensor's dispose leaves the memory to the application, which reads and wraps it again", async () => {
      const n = 1000;
      const data = values(n, 11);
      const ptr = app!.alloc(n * 4);
      app!.upload(ptr, data);
      app!.synchronize();
      const first = wrapDeviceMemory(b!, ptr, 'f32', [n]);
      first.dispose();
      check(first.disposed, 'a disposed wrapped tensor does not say so');
      let code: string | undefined;
      try {
        await b!.read(first);
      } catch (e) {
        code = isContractError(e) ? e.code : String(e);
      }
      check(code === 'KV003', `reading a disposed wrapped tensor gave ${code}`);
      check(sameBytes(app!.download(ptr, n * 4), bytesOf(data)), 'the memory changed after dispose');
      const again = wrapDeviceMemory(b!, ptr, 'f32', [10, 100]);
      check(sameBytes(bytesOf((await b!.read(again)) as Float32Array), bytesOf(data)), 'a second wrap does not read the same data');
      again.dispose();
      app!.free(ptr);
    }, 60_000);

    it('refuses, with KV044 and before any work, pointers it cannot vouch for (KV047: a shape past the allocation)', () => {
      const ptr = app!.alloc(4096);
      const hostMemory = Buffer.alloc(64);
      const host = BigInt(koffi.address(hostMemory));
      const cases: [string, () => unknown][] = [
        ['zero', () => wrapDeviceMemory(b!, 0n, 'f32', [4])],
        ['a string', () => wrapDeviceMemory(b!, '0x1000' as never, 'f32', [4])],
        ['misaligned', () => wrapDeviceMemory(b!, ptr + 2n, 'f32', [4])],
        ['host memory the driver does not know', () => wrapDeviceMemory(b!, host, 'f32', [4])],
      ];
      for (const [what, call] of cases) {
        let code: string | undefined;
        try {
          call();
        } catch (e) {
          code = isContractError(e) ? e.code : String(e);
        }
        check(code === 'KV044', `${what}: got ${code ?? 'no error'}`);
      }
      // A pointer the driver vouches for, with a shape that runs past its allocation: the view rule's KV047.
      let past: string | undefined;
      try {
        wrapDeviceMemory(b!, ptr + 4000n, 'f32', [100]);
      } catch (e) {
        past = isContractError(e) ? e.code : String(e);
      }
      check(past === 'KV047', `past the allocation: got ${past ?? 'no error'}`);
      app!.free(ptr);
    });

    it("on the application's stream, kvkit's work is ordered with the application's copies and the events it records", async () => {
      const on = await createCudaBackend({ stream: app!.stream });
      try {
        check(streamOf(on) === app!.stream, 'streamOf does not give back the stream passed in');
        check(streamOf(b!) !== app!.stream, 'an owned backend reports the application stream');
        const [N, H, D, S] = [257, 4, 64, 300];
        const row = H * D;
        const input = values(N * row, 12);
        const [k, v] = [app!.alloc(N * row * 4), app!.alloc(N * row * 4)];
        const [kPool, vPool, copied] = [app!.alloc(S * row * 4), app!.alloc(S * row * 4), app!.alloc(S * row * 4)];
        // The application's side stream fills the inputs; the kvkit stream waits for it by an event, never a host sync.
        const side = app!.newStream();
        app!.upload(k, input, side);
        app!.upload(v, input, side);
        app!.fill(kPool, 0, S * row * 4, side);
        app!.fill(vPool, 0, S * row * 4, side);
        app!.order(app!.stream, side);
        const slots = Int32Array.from({ length: N }, (_, n) => n);
        const kW = wrapDeviceMemory(on, k, 'f32', [N, H, D]);
        const out = untyped(on).ropePoolFused({
          q: kW,
          k: kW,
          v: wrapDeviceMemory(on, v, 'f32', [N, H, D]),
          positions: on.tensor('i32', [N], slots),
          slots: on.tensor('i32', [N], slots),
          kPool: wrapDeviceMemory(on, kPool, 'f32', [S, H, D]),
          vPool: wrapDeviceMemory(on, vPool, 'f32', [S, H, D]),
          numQoHeads: H,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        });
        // The application copies kvkit's pool out on its side stream, after an event on kvkit's stream.
        app!.order(side, streamOf(on));
        app!.copy(copied, vPool, S * row * 4, side);
        const mine = app!.download(copied, S * row * 4, side);
        check(sameBytes(mine.subarray(0, N * row * 4), bytesOf(input)), 'the copy ordered after kvkit does not hold the values kvkit scattered');
        check(mine.subarray(N * row * 4).every((x) => x === 0), 'slots no token names are not zero');
        const kRot = stored('f32', (await on.read(out.kRot)) as Float32Array);
        app!.synchronize();
        check(sameBytes(app!.download(kPool, N * row * 4), kRot), "kPool in the application's memory is not kRot");
        await on.sync();
      } finally {
        on.dispose();
      }
      // kvkit never destroys the application's stream: it still runs the application's work.
      const after = app!.alloc(64);
      app!.fill(after, 7, 64);
      check(app!.download(after, 64).every((x) => x === 7), "the application's stream no longer works after dispose");
      app!.free(after);
    }, 60_000);

    it("on the application's stream, the overlapped materializer's pool writes have all landed for work ordered after the call", async () => {
      const on = await createCudaBackend({ stream: app!.stream });
      try {
        // Many tokens over eight one-layer stages: an event taken before the last stage's norm would leave rows unwritten.
        const [L, H, D, hidden, T] = [8, 8, 128, 512, 4096];
        const S = T;
        const bytes = L * S * H * D * 2;
        const m = untyped(on).createKvMaterializer({
          kvWeight: on.tensor('bf16', [L, 2 * H * D, hidden], values(L * 2 * H * D * hidden, 51, 0.1)),
          kNormWeight: on.tensor('bf16', [L, D], new Float32Array(L * D).fill(1)),
          eps: 1e-6,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        });
        const ctxHidden = on.tensor('bf16', [T, hidden], values(T * hidden, 52));
        const positions = on.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t));
        const slots = on.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => t));
        const [kPtr, vPtr, copied] = [app!.alloc(bytes), app!.alloc(bytes), app!.alloc(2 * bytes)];
        app!.fill(kPtr, 0, bytes);
        app!.fill(vPtr, 0, bytes);
        const kPool = wrapDeviceMemory(on, kPtr, 'bf16', [L, S, H, D]);
        const vPool = wrapDeviceMemory(on, vPtr, 'bf16', [L, S, H, D]);
        const side = app!.newStream();
        await withTuning({ materializerSchedule: 'overlapped', overlapLayersPerStage: 1 }, async () => {
          m.materializeInto({ ctxHidden, positions, slots, kPool, vPool });
          // The application's side stream copies the pools out behind an event on its stream, taken as the call returns.
          app!.order(side, app!.stream);
          app!.copy(copied, kPtr, bytes, side);
          app!.copy(copied + BigInt(bytes), vPtr, bytes, side);
        });
        const early = app!.download(copied, 2 * bytes, side);
        await on.sync();
        const [k, v] = [bytesOf(await on.readBits(kPool)), bytesOf(await on.readBits(vPool))];
        check(sameBytes(early.subarray(0, bytes), k), 'kPool copied behind the call is not the pool as the call left it');
        check(sameBytes(early.subarray(bytes), v), 'vPool copied behind the call is not the pool as the call left it');
        check(!k.every((x) => x === 0), 'the call wrote nothing into kPool');
        m.dispose();
        for (const p of [kPtr, vPtr, copied]) app!.free(p);
      } finally {
        on.dispose();
      }
    }, 60_000);

    it('refuses a stream that is not a handle, and a device option other than the stream\'s, with KV044', async () => {
      for (const [what, options] of [
        ['zero', { stream: 0n }],
        ['a string', { stream: 'stream' as never }],
        ['another device', { stream: app!.stream, device: 1 }],
      ] as const) {
        let code: string | undefined;
        try {
          (await createCudaBackend(options)).dispose();
        } catch (e) {
          code = isContractError(e) ? e.code : String(e);
        }
        check(code === 'KV044', `${what}: got ${code ?? 'no error'}`);
      }
    });
  });
}
