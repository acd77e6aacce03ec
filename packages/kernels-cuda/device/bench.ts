/**
 * Speed on a GPU host against the ceilings measured in the same run
 * (shared/design/PERFORMANCE.md): device time per call with CUDA events.
 * Writes a JSON line per measurement and a table; bundled by device/bundle.mjs.
 */
import { writeFileSync } from 'node:fs';
import { numel } from '@kvkit/contracts';
import type { Backend, FloatDType, OwnedTensor, Tensor } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend, cudaBackendInfo } from '../src/index.js';
import { Projection } from '../src/ops/projection.js';
import { measureCopyCeiling, timeOnDevice, timeProjectionGemm } from '../src/profiling.js';
import { cudaKernelsOf } from '../src/runtime/registry.js';

type Row = Record<string, string | number>;
const rows: Row[] = [];
const report = (row: Row) => {
  rows.push(row);
  console.log(JSON.stringify(row));
};

function random(n: number, seed: number, scale = 1): Float32Array {
  const out = new Float32Array(n);
  let s = seed >>> 0;
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = ((s / 2 ** 32) * 2 - 1) * scale;
  }
  return out;
}

/** A float tensor filled on the device with uniform values in [-scale, scale): large inputs never cross from the host. */
function deviceRandom<DT extends FloatDType>(backend: Backend, dtype: DT, shape: readonly number[], seed: number, scale = 1): Tensor<DT> {
  const t = backend.empty(dtype, shape);
  const k = cudaKernelsOf(backend, 'bench');
  const count = numel(shape);
  k.params.fill.set('data', k.own(t as unknown as OwnedTensor).ptr).set('count', count).set('seed', seed).setDouble('scale', scale);
  k.cx.launch(`fill_random_${dtype}`, k.params.fill, Math.max(1, Math.min(Math.ceil(count / 256), 132 * 16)), 1, 256, 0, 'bench');
  return t;
}

function cosSin(P: number, R: number): Float32Array {
  const out = new Float32Array(P * R);
  for (let p = 0; p < P; p++)
    for (let j = 0; j < R / 2; j++) {
      const a = p * 10000 ** ((-2 * j) / R);
      out[p * R + j] = Math.cos(a);
      out[p * R + R / 2 + j] = Math.sin(a);
    }
  return out;
}

const b = await createCudaBackend();
const info = cudaBackendInfo(b);
console.log(JSON.stringify(info));
const copy = await measureCopyCeiling(b, 1 << 30);
report({ what: 'copy ceiling 1 GiB', us: +copy.timing.medianUs.toFixed(1), gbs: +copy.gbs.toFixed(0) });
const ceiling = copy.gbs;

// fusedNormRopeStacked, bf16 neox, the PERFORMANCE.md shapes; first checked against the CPU reference.
const cpu = createCpuBackend();
for (const [L, H, D, R, T] of [
  [5, 8, 128, 128, 16],
  [5, 8, 128, 128, 256],
  [5, 8, 128, 128, 4096],
  [5, 8, 128, 128, 32768],
  [1, 8, 128, 128, 32768],
  [5, 4, 64, 32, 32768],
] as const) {
  const P = 4096;
  const made: Tensor[] = [];
  const t = <X extends Tensor>(x: X) => (made.push(x), x);
  const args = {
    kv: t(deviceRandom(b, 'bf16', [T, L, 2 * H * D], 1)),
    kNormWeight: t(b.tensor('bf16', [L, D], random(L * D, 2).map((x) => 1 + 0.1 * x))),
    eps: t(b.tensor('f32', [L], new Float32Array(L).fill(1e-6))),
    cosSinCache: t(b.tensor('f32', [P, R], cosSin(P, R))),
    positions: t(b.tensor('i32', [T], Int32Array.from({ length: T }, (_, i) => (i * 7) % P))),
    numKvHeads: H,
    headDim: D,
    rotaryDim: R,
  };
  const kOut = t(b.empty('bf16', [L, T, H, D]));
  const vOut = t(b.empty('bf16', [L, T, H, D]));
  if (T <= 256) {
    (b.fusedNormRopeStacked as (a: unknown) => unknown)({ ...args, kOut, vOut });
    const ref = (cpu.fusedNormRopeStacked as (a: unknown) => { kOut: Tensor }) ({
      ...args,
      kv: cpu.tensor('f32', [T, L, 2 * H * D], await b.read(args.kv)),
      kNormWeight: cpu.tensor('f32', [L, D], await b.read(args.kNormWeight)),
      eps: cpu.tensor('f32', [L], await b.read(args.eps)),
      cosSinCache: cpu.tensor('f32', [P, R], await b.read(args.cosSinCache)),
      positions: cpu.tensor('i32', [T], await b.read(args.positions)),
    });
    const [got, want] = [(await b.read(kOut)) as Float32Array, (await cpu.read(ref.kOut)) as Float32Array];
    let d2 = 0;
    let r2 = 0;
    for (let i = 0; i < got.length; i++) {
      d2 += (got[i]! - want[i]!) ** 2;
      r2 += want[i]! ** 2;
    }
    report({ what: `check fused L=${L} H=${H} D=${D} R=${R} T=${T}`, relError: Math.sqrt(d2 / r2) });
  }
  const timing = await timeOnDevice(b, () => (b.fusedNormRopeStacked as (a: unknown) => unknown)({ ...args, kOut, vOut }), { batch: T >= 4096 ? 5 : 50 });
  const bytes = 2 * T * L * 2 * H * D * 2 + T * 4 + T * R * 4;
  const gbs = bytes / (timing.medianUs * 1e3);
  report({ what: `fusedNormRopeStacked bf16 L=${L} H=${H} D=${D} R=${R} T=${T}`, us: +timing.medianUs.toFixed(2), gbs: +gbs.toFixed(0), ofCopy: +(gbs / ceiling).toFixed(3) });
  for (const x of made) x.dispose();
}

// ropePoolFused, bf16, Hq=32 H=8 D=128.
for (const N of [16, 4096, 32768]) {
  const [Hq, H, D] = [32, 8, 128];
  const S = N;
  const made: Tensor[] = [];
  const t = <X extends Tensor>(x: X) => (made.push(x), x);
  const slots = Int32Array.from({ length: N }, (_, i) => (i * 7919) % S);
  const args = {
    q: t(deviceRandom(b, 'bf16', [N, Hq, D], 3)),
    k: t(deviceRandom(b, 'bf16', [N, H, D], 4)),
    v: t(deviceRandom(b, 'bf16', [N, H, D], 5)),
    positions: t(b.tensor('i32', [N], Int32Array.from({ length: N }, (_, i) => i))),
    slots: t(b.tensor('i32', [N], slots)),
    kPool: t(b.empty('bf16', [S, H, D])),
    vPool: t(b.empty('bf16', [S, H, D])),
    numQoHeads: Hq,
    numKvHeads: H,
    headDim: D,
    ropeBase: 10000,
  };
  const timing = await timeOnDevice(b, () => {
    const out = (b.ropePoolFused as (a: unknown) => { qRot: Tensor; kRot: Tensor })(args);
    out.qRot.dispose();
    out.kRot.dispose();
  }, { batch: N >= 4096 ? 5 : 50 });
  const bytes = N * 2 * (2 * Hq * D + 3 * H * D + 2 * H * D) + N * 8;
  const gbs = bytes / (timing.medianUs * 1e3);
  // The duplicate-slot pass alone, for the share of the op it takes.
  const k = cudaKernelsOf(b, 'bench');
  const claims = await timeOnDevice(b, () => k.slotOwners.claim(k.own(args.slots as unknown as OwnedTensor).ptr, false, N, S, 'bench'), { batch: N >= 4096 ? 5 : 50 });
  report({
    what: `ropePoolFused bf16 Hq=${Hq} H=${H} D=${D} N=${N}`,
    us: +timing.medianUs.toFixed(2),
    gbs: +gbs.toFixed(0),
    ofCopy: +(gbs / ceiling).toFixed(3),
    claimSlotsAloneUs: +claims.medianUs.toFixed(2),
  });
  for (const x of made) x.dispose();
}

// materialize end to end vs the projection GEMM alone, bf16, hidden 4096, L=5 H=8 D=128.
/** The materializer's projection as it runs: per-layer K and V blocks written [L, 2, T, H*D]. */
async function timePerLayerProjection(backend: Backend, T: number, K: number, N: number, blocks: number): Promise<number> {
  const k = cudaKernelsOf(backend, 'bench');
  const a = k.cx.alloc(T * K * 2, 'bench');
  const w = k.cx.alloc(N * K * 2, 'bench');
  const c = k.cx.alloc(T * N * 2, 'bench');
  const projection = new Projection(k, 'bf16', N, K, blocks);
  try {
    const timing = await timeOnDevice(backend, () => projection.run(a.ptr, w.ptr, c.ptr, T, 'bench'), { batch: 3 });
    return timing.medianUs;
  } finally {
    projection.dispose();
    for (const x of [a, w, c]) x.release();
  }
}

async function materializerRun(backend: Backend, label: string) {
  const [L, H, D, hidden] = [5, 8, 128, 4096];
  for (const T of [16, 4096]) {
    const N = L * 2 * H * D;
    const made: Tensor[] = [];
    const t = <X extends Tensor>(x: X) => (made.push(x), x);
    const m = (backend.createKvMaterializer as (a: unknown) => { materialize: (...a: unknown[]) => void; materializeInto: (a: unknown) => void; dispose(): void })({
      kvWeight: t(deviceRandom(backend, 'bf16', [L, 2 * H * D, hidden], 6, 1 / 64)),
      kNormWeight: t(backend.tensor('f32', [L, D], new Float32Array(L * D).fill(1))),
      eps: 1e-6,
      numKvHeads: H,
      headDim: D,
      ropeBase: 10000,
      maxPositionHint: 8192,
    });
    const ctx = t(deviceRandom(backend, 'bf16', [T, hidden], 7));
    const positions = t(backend.tensor('i32', [T], Int32Array.from({ length: T }, (_, i) => i)));
    const kPool = t(backend.empty('bf16', [L, T, H, D]));
    const vPool = t(backend.empty('bf16', [L, T, H, D]));
    const slots = t(backend.tensor('i32', [T], Int32Array.from({ length: T }, (_, i) => i)));
    const into = await timeOnDevice(backend, () => m.materializeInto({ ctxHidden: ctx, positions, kPool, vPool, slots }), { batch: 3 });
    const viaViews = await timeOnDevice(backend, () => m.materialize(ctx, positions, () => {}), { batch: 3 });
    const gemm = await timeProjectionGemm(backend, { T, K: hidden, N, dtype: 'bf16' });
    const perLayer = await timePerLayerProjection(backend, T, hidden, N, 2 * L);
    report({
      what: `materialize bf16 L=${L} H=${H} D=${D} hidden=${hidden} T=${T} (${label})`,
      intoUs: +into.medianUs.toFixed(1),
      materializeUs: +viaViews.medianUs.toFixed(1),
      gemmUs: +gemm.medianUs.toFixed(1),
      perLayerGemmUs: +perLayer.toFixed(1),
      gemmTflops: +gemm.tflops.toFixed(0),
      engine: gemm.engine,
      intoOverGemm: +(into.medianUs / gemm.medianUs).toFixed(3),
      materializeOverGemm: +(viaViews.medianUs / gemm.medianUs).toFixed(3),
    });
    m.dispose();
    for (const x of made) x.dispose();
  }
}
await materializerRun(b, info.gemm.engine);
const own = await createCudaBackend({ gemm: 'kvkit' });
await materializerRun(own, 'package GEMM');
own.dispose();
b.dispose();

const out = process.argv[2];
if (out) writeFileSync(out, JSON.stringify({ device: info, rows }, null, 2));
