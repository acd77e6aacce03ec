/**
 * kvkit on a WebGPU device the application owns, in Node: Dawn from the
 * `webgpu` package, the application's own buffers wrapped as tensors, one
 * `ropePoolFused` that writes the application's K/V cache, and the result
 * read back, once through kvkit and once through the application's own copy.
 *
 *   npx tsx examples/node-dawn.ts      (typed by examples/tsconfig.json)
 *
 * Prints one JSON line: the adapter, the inputs, and what came out.
 */
import { createWebGpuBackend } from '@kvkit/kernels-wgsl';
import { create, globals } from 'webgpu';

// GPUBufferUsage, GPUMapMode and the other WebGPU globals, which Node lacks.
Object.assign(globalThis, globals);

// Dawn's instance settles every promise of its adapters and devices; collected early, a pending one never
// resolves. Held until the process exits.
const dawn: GPU = create([]);
process.once('exit', () => dawn);

const adapter = await dawn.requestAdapter();
if (!adapter) throw new Error('Dawn found no adapter: install a Vulkan driver, or point VK_ICD_FILENAMES at SwiftShader');
const device = await adapter.requestDevice();

// A small model: N tokens, Hq query heads sharing H KV heads of D elements, a cache of S slots.
const [N, Hq, H, D, S] = [3, 4, 2, 8, 6] as const;
const q = Float32Array.from({ length: N * Hq * D }, (_, i) => Math.sin(i + 1));
const k = Float32Array.from({ length: N * H * D }, (_, i) => Math.cos(i + 1));
const v = Float32Array.from({ length: N * H * D }, (_, i) => (i % 7) - 3);
const positions = Int32Array.from([0, 5, 17]);
const slots = Int32Array.from([4, 0, 2]);

/** A buffer of the application's, holding `data`; STORAGE for kvkit's kernels, COPY_SRC to be read back. */
function applicationBuffer(data: Float32Array<ArrayBuffer> | Int32Array<ArrayBuffer>): GPUBuffer {
  const buffer = device.createBuffer({ size: data.byteLength, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
  device.queue.writeBuffer(buffer, 0, data);
  return buffer;
}

const kCache = applicationBuffer(new Float32Array(S * H * D));
const vCache = applicationBuffer(new Float32Array(S * H * D));

const gpu = await createWebGpuBackend({ device });
const { qRot, kRot } = gpu.ropePoolFused({
  q: gpu.wrap(applicationBuffer(q), 'f32', [N, Hq, D]),
  k: gpu.wrap(applicationBuffer(k), 'f32', [N, H, D]),
  v: gpu.wrap(applicationBuffer(v), 'f32', [N, H, D]),
  positions: gpu.wrap(applicationBuffer(positions), 'i32', [N]),
  slots: gpu.wrap(applicationBuffer(slots), 'i32', [N]),
  kPool: gpu.wrap(kCache, 'f32', [S, H, D]),
  vPool: gpu.wrap(vCache, 'f32', [S, H, D]),
  numQoHeads: Hq,
  numKvHeads: H,
  headDim: D,
  ropeBase: 10000,
}); // it wrote the application's caches, so it submitted before returning

/** The application's own read of its buffer: a copy in a submit of its own, which runs after kvkit's work. */
async function readBack(buffer: GPUBuffer): Promise<Float32Array> {
  const staging = device.createBuffer({ size: buffer.size, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  encoder.copyBufferToBuffer(buffer, 0, staging, 0, buffer.size);
  device.queue.submit([encoder.finish()]);
  await staging.mapAsync(GPUMapMode.READ);
  const values = new Float32Array(staging.getMappedRange().slice(0));
  staging.destroy();
  return values;
}

const result = {
  adapter: [adapter.info.vendor, adapter.info.architecture, adapter.info.description].filter(Boolean).join(' '),
  dims: { N, Hq, H, D, S },
  inputs: { q: [...q], k: [...k], v: [...v], positions: [...positions], slots: [...slots] },
  qRot: [...(await gpu.read(qRot))],
  kRot: [...(await gpu.read(kRot))],
  kCache: [...(await readBack(kCache))],
  vCache: [...(await readBack(vCache))],
};
console.log(JSON.stringify(result));

gpu.dispose(); // frees kvkit's own buffers; the wrapped ones stay the application's
device.destroy();
