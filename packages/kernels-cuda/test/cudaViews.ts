/**
 * Strided views on the GPU, beyond the cross-backend suite: q, k, v as views
 * of one fused qkv projection in application memory read in place (no
 * gather), transposed and offset views through the element path, strided
 * wraps, and the bits of each compared with the same op on contiguous copies.
 * describe/it and the hooks only, so the device bundle runs these under node:test.
 */
import { isContractError } from '@kvkit/contracts';
import type { Backend, FloatDType, Tensor } from '@kvkit/contracts';
import { decodeFp8s, encodeFp8, encodeTensorData, storageView } from '@kvkit/contracts/backend';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { createCudaBackend, wrapDeviceMemory } from '../src/index.js';
import { ELEMENT_BYTES } from '../src/runtime/cudaTensor.js';
import { findCudaKernels } from '../src/runtime/registry.js';
import { ApplicationCuda } from './applicationCuda.js';
import { untyped, values } from './checkSupport.js';

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

const DTYPES: readonly FloatDType[] = ['f32', 'f16', 'bf16'];
const sameBits = (a: ArrayLike<number>, b: ArrayLike<number>) => a.length === b.length && Array.from(a).every((x, i) => x === b[i]);

function codeOf(call: () => unknown): string {
  try {
    call();
  } catch (e) {
    return isContractError(e) ? e.code : String(e);
  }
  return 'no error';
}

/** Host bytes of `data` as `dtype` stores it. */
function stored(dtype: FloatDType, data: Float32Array): Uint8Array {
  const out = storageView(dtype, new ArrayBuffer(data.length * ELEMENT_BYTES[dtype]), data.length);
  encodeTensorData(dtype, data, out);
  return new Uint8Array(out.buffer, out.byteOffset, out.byteLength);
}

export function defineCudaViewChecks(): void {
  describe('cuda: strided views', () => {
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
    const gathers = () => findCudaKernels(b)!.gather.launches;
    const bits = (t: Tensor) => b!.readBits(t) as Promise<ArrayLike<number>>;

    for (const dtype of DTYPES) {
      it(`ropePoolFused on q, k, v views of a fused projection in application memory reads them in place, bit for bit as contiguous copies [${dtype}]`, async () => {
        const [N, Hq, H, D, S] = [29, 8, 2, 128, 40];
        const width = (Hq + 2 * H) * D;
        const data = values(N * width, 21);
        const ptr = app!.alloc(N * width * ELEMENT_BYTES[dtype]);
        app!.upload(ptr, stored(dtype, data));
        app!.synchronize();
        const qkv = wrapDeviceMemory(b!, ptr, dtype, [N, width]);
        const { q, k, v } = b!.splitQkv(qkv, { numQoHeads: Hq, numKvHeads: H, headDim: D });
        const slots = Int32Array.from({ length: N }, (_, n) => (n % 7 === 6 ? -1 : (n * 3) % S)); // contested and skipped
        const make = () => ({
          positions: b!.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => 5 + 11 * n)),
          slots: b!.tensor('i32', [N], slots),
          kPool: b!.tensor(dtype, [S, H, D], values(S * H * D, 22)),
          vPool: b!.tensor(dtype, [S, H, D], values(S * H * D, 23)),
        });
        const common = { numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 500000 };
        const before = gathers();
        const viewed = make();
        const fromViews = untyped(b!).ropePoolFused({ q, k, v, ...viewed, ...common });
        check(gathers() === before, `views of a fused projection were gathered (${gathers() - before} copies): the fast path was not taken`);
        // The contiguous copies, made by the backend's own read of the views.
        const copies = {
          q: b!.tensorFromBits(dtype, [N, Hq, D], (await b!.readBits(q)) as never),
          k: b!.tensorFromBits(dtype, [N, H, D], (await b!.readBits(k)) as never),
          v: b!.tensorFromBits(dtype, [N, H, D], (await b!.readBits(v)) as never),
        };
        const owned = make();
        const fromCopies = untyped(b!).ropePoolFused({ ...copies, ...owned, ...common });
        await b!.sync();
        for (const [name, x, y] of [['qRot', fromViews.qRot, fromCopies.qRot], ['kRot', fromViews.kRot, fromCopies.kRot], ['kPool', viewed.kPool, owned.kPool], ['vPool', viewed.vPool, owned.vPool]] as const) {
          check(sameBits(await bits(x), await bits(y)), `${name}: views and contiguous copies differ`);
        }
        for (const t of [q, k, v, qkv, ...Object.values(viewed), ...Object.values(owned), ...Object.values(copies), fromViews.qRot, fromViews.kRot, fromCopies.qRot, fromCopies.kRot]) t.dispose();
        app!.free(ptr);
      }, 60_000);

      it(`transposed, odd-offset and strided-index views take the element path or a gather and give the contiguous copies' bits [${dtype}]`, async () => {
        const [N, H, D, S] = [17, 3, 64, 20];
        // k as [N, H, D] over storage laid out [D, H, N] (every stride != 1 in the row), v one element off alignment.
        const kBase = b!.tensor(dtype, [D, H, N], values(N * H * D, 31));
        const k = b!.view(kBase, [N, H, D], { strides: [1, N, H * N] });
        const vBase = b!.tensor(dtype, [N * H * D + 1], values(N * H * D + 1, 32));
        const v = b!.view(vBase, [N, H, D], { offset: 1 });
        const q = b!.view(b!.view(kBase, [D * H * N], {}), [N, H, D], { strides: [1, N, H * N] }); // a view of a view
        const posBase = b!.tensor('i32', [2 * N], Int32Array.from({ length: 2 * N }, (_, i) => 3 * i));
        const positions = b!.view(posBase, [N], { strides: [2], offset: 1 });
        const slots = b!.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => (n * 5) % S));
        const pools = () => ({ kPool: b!.tensor(dtype, [S, H, D], values(S * H * D, 33)), vPool: b!.tensor(dtype, [S, H, D], values(S * H * D, 34)) });
        const common = { numQoHeads: H, numKvHeads: H, headDim: D, ropeBase: 10000, slots };
        const before = gathers();
        const viewed = pools();
        const fromViews = untyped(b!).ropePoolFused({ q, k, v, positions, ...viewed, ...common });
        check(gathers() === before + 1, `expected one gather (positions), got ${gathers() - before}`);
        const copy = async (t: Tensor) => b!.tensorFromBits(t.dtype, t.shape, (await b!.readBits(t)) as never);
        const owned = pools();
        const fromCopies = untyped(b!).ropePoolFused({ q: await copy(q), k: await copy(k), v: await copy(v), positions: await copy(positions), ...owned, ...common });
        await b!.sync();
        for (const [name, x, y] of [['qRot', fromViews.qRot, fromCopies.qRot], ['kRot', fromViews.kRot, fromCopies.kRot], ['kPool', viewed.kPool, owned.kPool], ['vPool', viewed.vPool, owned.vPool]] as const) {
          check(sameBits(await bits(x), await bits(y)), `${name}: views and contiguous copies differ`);
        }
        // read() of a strided view gives its elements in row-major order.
        const got = (await b!.read(positions)) as Int32Array;
        check(sameBits(got, Int32Array.from({ length: N }, (_, n) => 3 * (2 * n + 1))), `read of a strided view: [${Array.from(got).slice(0, 4)}...]`);
      }, 60_000);

      it(`fusedNormRopeStacked on a padded and on a transposed kv gives the contiguous copy's bits [${dtype}]`, async () => {
        const [T, L, H, D, R, P] = [9, 2, 2, 64, 64, 40];
        const row = L * 2 * H * D;
        const padded = b!.view(b!.tensor(dtype, [T, row + 8], values(T * (row + 8), 41)), [T, L, 2 * H * D], { strides: [row + 8, 2 * H * D, 1] });
        const transposed = b!.view(b!.tensor(dtype, [2 * H * D, L, T], values(T * row, 42)), [T, L, 2 * H * D], { strides: [1, T, L * T] });
        const common = {
          kNormWeight: b!.tensor('f32', [L, D], values(L * D, 43).map((x) => 1 + 0.25 * x)),
          eps: b!.tensor('f32', [L], [1e-6, 1e-5]),
          cosSinCache: b!.tensor(dtype, [P, R], values(P * R, 44)),
          positions: b!.tensor('i32', [T], Int32Array.from({ length: T }, (_, t) => (7 * t) % P)),
          numKvHeads: H,
          headDim: D,
          rotaryDim: R,
        };
        for (const [name, kv, copies] of [['padded', padded, 0], ['transposed', transposed, 1]] as const) {
          const before = gathers();
          const fromView = untyped(b!).fusedNormRopeStacked({ kv, ...common });
          check(gathers() - before === copies, `${name}: ${gathers() - before} gathers, expected ${copies}`);
          const copy = b!.tensorFromBits(dtype, kv.shape, (await b!.readBits(kv)) as never);
          const fromCopy = untyped(b!).fusedNormRopeStacked({ kv: copy, ...common });
          await b!.sync();
          check(sameBits(await bits(fromView.kOut), await bits(fromCopy.kOut)), `${name}: kOut differs from the contiguous copy's`);
          check(sameBits(await bits(fromView.vOut), await bits(fromCopy.vOut)), `${name}: vOut differs from the contiguous copy's`);
        }
      }, 60_000);
    }

    it('wraps application memory with strides, checks them against the allocation, and tells overlapping wraps of it apart', async () => {
      const [N, H, D] = [6, 2, 8];
      const ptr = app!.alloc(N * 3 * H * D * 4);
      const wide = wrapDeviceMemory(b!, ptr, 'f32', [N, H, D], { strides: [3 * H * D, D, 1] });
      check(wide.strides.join() === `${3 * H * D},${D},1`, `strides of the wrapped tensor: ${wide.strides}`);
      check(codeOf(() => wrapDeviceMemory(b!, ptr, 'f32', [N, H, D], { strides: [4 * H * D, D, 1] })) === 'KV047', 'a strided wrap past the allocation was not KV047');
      check(codeOf(() => wrapDeviceMemory(b!, ptr, 'f32', [N, H, D], { strides: [3 * H * D, D] })) === 'KV046', 'strides of the wrong rank were not KV046');
      check(codeOf(() => wrapDeviceMemory(b!, ptr, 'f32', [N, H, D], { strides: [3 * H * D, -1, 1] })) === 'KV046', 'a negative stride was not KV046');
      // A pool wrapped over the same allocation as k, from another pointer: the overlap is KV039, before anything runs.
      const k = wrapDeviceMemory(b!, ptr + BigInt(H * D * 4), 'f32', [N, H, D], { strides: [3 * H * D, D, 1] });
      const pool = wrapDeviceMemory(b!, ptr, 'f32', [N, H, D]);
      const args = { q: k, k, v: k, positions: b!.tensor('i32', [N], [0, 1, 2, 3, 4, 5]), slots: b!.tensor('i32', [N], [0, 1, 2, 3, 4, 5]), kPool: pool, vPool: b!.tensor('f32', [N, H, D], values(N * H * D, 51)), numQoHeads: H, numKvHeads: H, headDim: D, ropeBase: 10000 };
      check(codeOf(() => untyped(b!).ropePoolFused(args)) === 'KV039', 'a pool overlapping k in one allocation was not KV039');
      // A strided pool is refused (written in place).
      check(codeOf(() => untyped(b!).ropePoolFused({ ...args, kPool: wide, v: b!.tensor('f32', [N, H, D], values(N * H * D, 52)), q: b!.tensor('f32', [N, H, D], values(N * H * D, 53)), k: b!.tensor('f32', [N, H, D], values(N * H * D, 54)) })) === 'KV048', 'a strided pool was not KV048');
      for (const t of [wide, k, pool]) t.dispose();
      app!.free(ptr);
    }, 60_000);

    it('fp8 tensors past the device-conversion size encode on the host, and fp8 views read through the byte gather: the codec\'s bytes and values', async () => {
      // 2^16 + 3 values: past the size where f16/bf16 transfers convert on the device, which fp8 must not take.
      const n = (1 << 16) + 3;
      const data = values(n, 71, 500);
      for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
        const t = b!.tensor(dtype, [n], data);
        const want = Uint8Array.from(data, (x) => encodeFp8(dtype, x));
        const got = (await b!.readBits(t)) as Uint8Array;
        check(got instanceof Uint8Array && got.length === n && got.every((x, i) => x === want[i]), `readBits of tensor('${dtype}') differs from the codec's bytes`);
        const read = await b!.read(t);
        const decoded = decodeFp8s(dtype, want);
        check(read.length === n && Array.from(read).every((x, i) => Object.is(x, decoded[i])), `read() of tensor('${dtype}') differs from the codec's values`);
        // Every third byte from the second: gathered byte by byte before the copy out.
        const strided = b!.view(t, [Math.floor((n - 1) / 3)], { strides: [3], offset: 1 });
        const viewBits = (await b!.readBits(strided)) as Uint8Array;
        check(viewBits.length === strided.shape[0] && viewBits.every((x, i) => x === want[1 + 3 * i]), `readBits of a strided ${dtype} view differs from its bytes`);
        const viewValues = await b!.read(strided);
        check(Array.from(viewValues).every((x, i) => Object.is(x, decoded[1 + 3 * i])), `read() of a strided ${dtype} view differs from its values`);
        t.dispose();
      }
    }, 60_000);

    it('the materializer keeps views of its weights as copies of their elements and reads an offset ctxHidden off its alignment', async () => {
      const [T, L, H, D, hidden] = [7, 2, 2, 32, 48];
      const kvWeightData = values(L * 2 * H * D * hidden, 61, 0.1);
      const kNormData = values(L * D, 62).map((x) => 1 + 0.2 * x);
      const hiddenData = values(T * hidden, 63);
      // kNormWeight as the columns of a transposed [D, L] tensor; ctxHidden one element into a larger tensor.
      const kNormT = b!.tensor('f32', [D, L], Float32Array.from({ length: D * L }, (_, i) => kNormData[(i % L) * D + Math.floor(i / L)]!));
      const kNormView = b!.view(kNormT, [L, D], { strides: [1, L] });
      const hiddenBase = b!.tensor('f32', [T * hidden + 1], Float32Array.from([0.5, ...hiddenData]));
      const ctxView = b!.view(hiddenBase, [T, hidden], { offset: 1 });
      const common = { numKvHeads: H, headDim: D, ropeBase: 10000, eps: 1e-6, kvWeight: b!.tensor('f32', [L, 2 * H * D, hidden], kvWeightData) };
      const results: ArrayLike<number>[][] = [];
      for (const [kNormWeight, ctxHidden] of [[kNormView, ctxView], [b!.tensor('f32', [L, D], kNormData), b!.tensor('f32', [T, hidden], hiddenData)]] as const) {
        const m = untyped(b!).createKvMaterializer({ ...common, kNormWeight });
        const layers: Promise<ArrayLike<number>>[] = [];
        m.materialize({ ctxHidden, positions: b!.tensor('i32', [T], [0, 3, 6, 9, 12, 15, 18]), writeLayerKv: (_l: number, k: Tensor, v: Tensor) => {
            layers.push(bits(k), bits(v));
          },
        });
        results.push(await Promise.all(layers));
        m.dispose();
      }
      kNormT.dispose(); // the materializer kept a copy, not the view
      await b!.sync();
      check(results[0]!.length === 2 * L && results[0]!.every((r, i) => sameBits(r, results[1]![i]!)), 'views of the weights and inputs gave other bits than contiguous tensors');
    }, 60_000);
  });
}
