/**
 * fp8 pool codes next to every rounding tie: V rows copied into fp8 pools
 * are the codes of v / scale, which the kernels take from v times the
 * scale's inverse except near a tie of fp8 (kv_pool.cuh fp8PairOfQuotients).
 * Values a few f32 units either side of each tie, times the scale of their
 * head, must give the bytes the CPU reference gives (the division, exact),
 * on the vector path and on the element path.
 */
import type { Backend, Fp8DType } from '@kvkit/contracts';
import { decodeFp8s } from '@kvkit/contracts/backend';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { untyped } from './checkSupport.js';

/** f32 units either side of a tie: past the kernels' window (kQuotientSlack, 8) on both sides. */
const UNITS = 12;
/** Per-head scales: not powers of two, so the quotients' low bits vary; one near a binade's top. */
const SCALES = [0.37, 1.9990234375e-3];

/** Every tie of the format's finite positive codes, both signs. */
function ties(dtype: Fp8DType): number[] {
  const codes = Uint8Array.from({ length: 0x80 }, (_, c) => c);
  const values = Array.from(decodeFp8s(dtype, codes)).filter(Number.isFinite);
  const out: number[] = [];
  for (let c = 0; c + 1 < values.length; c++) {
    const tie = (values[c]! + values[c + 1]!) / 2;
    out.push(tie, -tie);
  }
  return out;
}

/** The f32 values whose bits are `units` either side of fround(x). */
function around(x: number, units: number): number[] {
  const f = new Float32Array([x]);
  const bits = new Int32Array(f.buffer);
  const base = bits[0]!;
  const out: number[] = [];
  for (let k = -units; k <= units; k++) {
    bits[0] = base + k;
    out.push(f[0]!);
  }
  return out;
}

export function defineFp8TieChecks(create: () => Promise<Backend>): void {
  describe('cuda: fp8 pool codes next to every rounding tie', () => {
    let b: Backend | undefined;
    const cpu = createCpuBackend();
    beforeAll(async () => {
      b = await create();
    }, 60_000);
    afterAll(() => {
      b?.dispose();
      cpu.dispose();
    });

    for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
      for (const D of [128, 6]) {
        it(`v / scale into ${dtype} pools, ${UNITS} units either side of each tie, the CPU reference's bytes (D = ${D}, ${D % 4 === 0 ? 'vector' : 'element'} path)`, async () => {
          const H = SCALES.length;
          const perHead = SCALES.map((s) => ties(dtype).flatMap((t) => around(t * s, UNITS)));
          const N = Math.ceil(Math.max(...perHead.map((v) => v.length)) / D);
          const v = new Float32Array(N * H * D);
          for (let n = 0; n < N; n++) for (let h = 0; h < H; h++) for (let d = 0; d < D; d++) v[(n * H + h) * D + d] = perHead[h]![(n * D + d) % perHead[h]!.length]!;
          const run = async (backend: Backend) => {
            const pools = { kPool: backend.empty(dtype, [N, H, D]), vPool: backend.empty(dtype, [N, H, D]) };
            const made = [
              backend.tensor('f32', [N, H, D], Float32Array.from({ length: N * H * D }, (_, i) => Math.sin(i))),
              backend.tensor('f32', [N, H, D], Float32Array.from({ length: N * H * D }, (_, i) => Math.cos(i))),
              backend.tensor('f32', [N, H, D], v),
              backend.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => n)),
              backend.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => n)),
              backend.tensor('f32', [H], SCALES),
              backend.tensor('f32', [H], SCALES),
            ];
            const [q, k, vt, positions, slots, kScale, vScale] = made;
            const { qRot, kRot } = untyped(backend).ropePoolFused({ q, k, v: vt, positions, slots, ...pools, kScale, vScale, numQoHeads: H, numKvHeads: H, headDim: D, rotaryDim: D, ropeBase: 10000 });
            const bytes = await backend.readBits(pools.vPool);
            for (const x of [...made, qRot, kRot, pools.kPool, pools.vPool]) x.dispose();
            return new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
          };
          const [got, want] = await Promise.all([run(b!), run(cpu)]);
          const wrong = got.findIndex((x, i) => x !== want[i]);
          if (wrong >= 0) throw new Error(`vPool byte ${wrong} (v = ${v[wrong]}, head ${Math.floor(wrong / D) % H}): 0x${got[wrong]!.toString(16)}, the reference 0x${want[wrong]!.toString(16)}`);
        });
      }
    }
  });
}
