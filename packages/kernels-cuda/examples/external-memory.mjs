#!/usr/bin/env node
// kvkit inside an engine: the engine allocates device memory and a stream
// itself (its own koffi bindings of libcuda), holds its fused qkv projection
// [N, (Hq + 2H)·D] in one allocation, positions, slots and its KV pools in
// others, and kvkit's ropePoolFused reads q, k and v as strided views of that
// projection (no copy) and scatters straight into the pools on the engine's
// stream. The engine copies the pools out with its own cuMemcpyDtoH after a
// stream sync. The results must be bit for bit those of the same call on
// contiguous kvkit tensors holding the same bits, and match the CPU reference
// (vPool bit for bit, the rotated values within one bf16 step). Prints PASS
// or FAIL (exit code 1).
//   node packages/kernels-cuda/examples/external-memory.mjs
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend, LIBCUDA, probeCuda, streamOf, wrapDeviceMemory } from '@kvkit/kernels-cuda';
import koffi from 'koffi';

const probe = probeCuda();
if (!probe.ok) {
  console.log(`external-memory: nothing run, ${probe.reason}`);
  process.exit(2);
}

// ---- the engine's CUDA, not kvkit's ----
const libcuda = koffi.load(LIBCUDA);
const bind = (decl) => {
  const f = libcuda.func(decl);
  const name = decl.slice(4, decl.indexOf('('));
  return (...args) => {
    const status = f(...args);
    if (status !== 0) throw new Error(`${name} failed with CUDA error ${status}`);
  };
};
const cuInit = bind('int cuInit(unsigned int flags)');
const cuDevicePrimaryCtxRetain = bind('int cuDevicePrimaryCtxRetain(_Out_ void **ctx, int dev)');
const cuDevicePrimaryCtxRelease = bind('int cuDevicePrimaryCtxRelease_v2(int dev)');
const cuCtxSetCurrent = bind('int cuCtxSetCurrent(void *ctx)');
const cuStreamCreate = bind('int cuStreamCreate(_Out_ void **stream, unsigned int flags)');
const cuStreamSynchronize = bind('int cuStreamSynchronize(void *stream)');
const cuStreamDestroy = bind('int cuStreamDestroy_v2(void *stream)');
const cuMemAlloc = bind('int cuMemAlloc_v2(_Out_ uint64_t *dptr, size_t bytes)');
const cuMemFree = bind('int cuMemFree_v2(uint64_t dptr)');
const cuMemcpyHtoDAsync = bind('int cuMemcpyHtoDAsync_v2(uint64_t dst, void *src, size_t bytes, void *stream)');
const cuMemcpyDtoH = bind('int cuMemcpyDtoH_v2(void *dst, uint64_t src, size_t bytes)');

cuInit(0);
const ctx = [null];
cuDevicePrimaryCtxRetain(ctx, 0);
cuCtxSetCurrent(ctx[0]);
const made = [null];
cuStreamCreate(made, 1); // CU_STREAM_NON_BLOCKING, as engines make theirs
const stream = made[0];
const allocations = [];
const alloc = (bytes) => {
  const p = [0n];
  cuMemAlloc(p, bytes);
  allocations.push(BigInt(p[0]));
  return BigInt(p[0]);
};

// ---- the engine's data: bf16 activations and pools as raw 16-bit values ----
const [N, Hq, H, D, S] = [37, 8, 2, 128, 64];
let seed = 12345;
const random = () => {
  seed = (Math.imul(seed, 1664525) + 1013904223) >>> 0;
  return (seed / 2 ** 32) * 2 - 1;
};
const word = new Float32Array(1);
const bits = new Uint32Array(word.buffer);
/** f32 to bf16, rounding to nearest even (no NaNs here). */
const toBf16 = (x) => {
  word[0] = x;
  return (bits[0] + 0x7fff + ((bits[0] >>> 16) & 1)) >>> 16;
};
const fromBf16 = (b) => {
  bits[0] = b << 16;
  return word[0];
};
const bf16Values = (n) => Uint16Array.from({ length: n }, () => toBf16(random()));
const floats = (halves) => Float32Array.from(halves, fromBf16);

// One token's row of the projection: its Hq query heads, then H key heads, then H value heads.
const width = (Hq + 2 * H) * D;
const host = {
  qkv: bf16Values(N * width),
  kPool: bf16Values(S * H * D),
  vPool: bf16Values(S * H * D),
  positions: Int32Array.from({ length: N }, (_, n) => 100 + 3 * n),
  // Contested slots (several tokens name one: the last wins) and skipped tokens (-1).
  slots: Int32Array.from({ length: N }, (_, n) => (n % 6 === 5 ? -1 : (n * 7) % 24)),
};
const device = {};
for (const [name, data] of Object.entries(host)) {
  device[name] = alloc(data.byteLength);
  cuMemcpyHtoDAsync(device[name], data, data.byteLength, stream);
}

// ---- kvkit on the engine's stream and memory ----
const gpu = await createCudaBackend({ stream });
// q, k and v as the engine describes slices of its projection (pointer and strides in elements, as PyTorch's
// tensor.stride() gives them); backend.splitQkv(wrapDeviceMemory(gpu, device.qkv, 'bf16', [N, width]), heads) is the same.
const headBytes = BigInt(D * 2);
const sliceOf = (firstHead, heads) => wrapDeviceMemory(gpu, device.qkv + BigInt(firstHead) * headBytes, 'bf16', [N, heads, D], { strides: [width, D, 1] });
const wrapped = {
  q: sliceOf(0, Hq),
  k: sliceOf(Hq, H),
  v: sliceOf(Hq + H, H),
  kPool: wrapDeviceMemory(gpu, device.kPool, 'bf16', [S, H, D]),
  vPool: wrapDeviceMemory(gpu, device.vPool, 'bf16', [S, H, D]),
  positions: wrapDeviceMemory(gpu, device.positions, 'i32', [N]),
  slots: wrapDeviceMemory(gpu, device.slots, 'i32', [N]),
};
const params = { numQoHeads: Hq, numKvHeads: H, headDim: D, ropeBase: 500000 };
// Enqueued after the engine's uploads on the same stream: no host sync in between.
const { qRot, kRot } = gpu.ropePoolFused({ ...wrapped, ...params });

// The engine's own read-back: wait for its stream, then a plain copy.
cuStreamSynchronize(streamOf(gpu));
const kPoolBits = new Uint16Array(S * H * D);
const vPoolBits = new Uint16Array(S * H * D);
cuMemcpyDtoH(kPoolBits, device.kPool, kPoolBits.byteLength);
cuMemcpyDtoH(vPoolBits, device.vPool, vPoolBits.byteLength);
await gpu.sync(); // reports a bad position or slot, had there been one
const gpuQRot = await gpu.read(qRot);
const gpuKRot = await gpu.read(kRot);

// ---- the same call on contiguous kvkit tensors holding the same bits ----
/** Heads [first, first + heads) of every token of the projection, as a contiguous [N, heads, D] array of bf16 bits. */
const headsOf = (first, heads) => {
  const out = new Uint16Array(N * heads * D);
  for (let n = 0; n < N; n++) out.set(host.qkv.subarray(n * width + first * D, n * width + (first + heads) * D), n * heads * D);
  return out;
};
const bitsTensor = (shape, bits) => gpu.tensorFromBits('bf16', shape, bits);
const contiguous = {
  q: bitsTensor([N, Hq, D], headsOf(0, Hq)),
  k: bitsTensor([N, H, D], headsOf(Hq, H)),
  v: bitsTensor([N, H, D], headsOf(Hq + H, H)),
  kPool: bitsTensor([S, H, D], host.kPool),
  vPool: bitsTensor([S, H, D], host.vPool),
  positions: gpu.tensor('i32', [N], host.positions),
  slots: gpu.tensor('i32', [N], host.slots),
};
const owned = gpu.ropePoolFused({ ...contiguous, ...params });
const ownedBits = {
  qRot: await gpu.readBits(owned.qRot),
  kRot: await gpu.readBits(owned.kRot),
  kPool: await gpu.readBits(contiguous.kPool),
  vPool: await gpu.readBits(contiguous.vPool),
};
const viewBits = { qRot: await gpu.readBits(qRot), kRot: await gpu.readBits(kRot), kPool: kPoolBits, vPool: vPoolBits };

// ---- the same call on the CPU reference ----
const cpu = createCpuBackend();
const t = (dtype, shape, data) => cpu.tensor(dtype, shape, data);
const ref = {
  q: t('bf16', [N, Hq, D], floats(headsOf(0, Hq))),
  k: t('bf16', [N, H, D], floats(headsOf(Hq, H))),
  v: t('bf16', [N, H, D], floats(headsOf(Hq + H, H))),
  kPool: t('bf16', [S, H, D], floats(host.kPool)),
  vPool: t('bf16', [S, H, D], floats(host.vPool)),
  positions: t('i32', [N], host.positions),
  slots: t('i32', [N], host.slots),
};
const cpuOut = cpu.ropePoolFused({ ...ref, ...params });
const expected = {
  qRot: await cpu.read(cpuOut.qRot),
  kRot: await cpu.read(cpuOut.kRot),
  kPool: await cpu.read(ref.kPool),
  vPool: await cpu.read(ref.vPool),
};

// Rotation rounds once to bf16 on both sides (f32 math here, f64 there): at most one bf16 step apart.
const within = (got, want) => Math.abs(got - want) <= 2 ** -7 * Math.abs(want) + 1e-6;
const report = [];
const compare = (name, got, want, exact) => {
  let bad = 0;
  let worst = 0;
  for (let i = 0; i < want.length; i++) {
    const ok = exact ? Object.is(got[i], want[i]) : within(got[i], want[i]);
    if (!ok) bad += 1;
    worst = Math.max(worst, Math.abs(got[i] - want[i]));
  }
  report.push(`${name}: ${want.length} values, ${bad} outside tolerance, max |diff| ${worst.toExponential(2)}${exact ? ' (bit-exact required)' : ''}`);
  return bad === 0;
};
const sameBits = (name, got, want) => {
  let bad = 0;
  for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) bad += 1;
  report.push(`${name}: views of the engine's projection vs contiguous kvkit tensors, ${want.length} values, ${bad} bit patterns differ`);
  return bad === 0 && got.length === want.length;
};
const results = [
  ...Object.keys(ownedBits).map((name) => sameBits(name, viewBits[name], ownedBits[name])),
  compare('qRot', gpuQRot, expected.qRot, false),
  compare('kRot', gpuKRot, expected.kRot, false),
  compare('kPool (engine memory)', floats(kPoolBits), expected.kPool, false),
  // V is scattered unchanged: the engine's pool must hold the CPU's bits exactly.
  compare('vPool (engine memory)', floats(vPoolBits), expected.vPool, true),
];

// kvkit frees what it allocated (qRot, kRot); the engine's memory and stream stay the engine's.
for (const x of [qRot, kRot, owned.qRot, owned.kRot, ...Object.values(wrapped), ...Object.values(contiguous)]) x.dispose();
gpu.dispose();
cpu.dispose();
for (const p of allocations) cuMemFree(p);
cuStreamDestroy(stream);
cuDevicePrimaryCtxRelease(0);

for (const line of report) console.log(line);
const pass = results.every(Boolean);
console.log(pass ? "PASS external-memory: ropePoolFused on views of the engine's fused qkv, on its memory and stream, matches contiguous tensors bit for bit and the CPU reference" : 'FAIL external-memory');
process.exit(pass ? 0 : 1);
