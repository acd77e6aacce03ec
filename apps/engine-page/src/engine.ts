/**
 * The application's side of the page, written as an engine would: its own
 * device, its own buffers, its own WGSL. Nothing here knows about kvkit.
 */
import { CACHE_ELEMENTS, QKV_WIDTH, randomFloats, SCENARIO } from './scenario.js';

const WORKGROUP = 64;

// GPUBufferUsage and GPUMapMode values: TypeScript's DOM lib declares their types, not these constants.
const STORAGE = 0x0080;
const UNIFORM = 0x0040;
const COPY_SRC = 0x0004;
const COPY_DST = 0x0008;
const MAP_READ = 0x0001;
const MAP_MODE_READ = 0x0001;

/** qkv[n, o] = Σ_i hidden[n, i] · weight[o, i], written `qkvOffset` elements into its buffer. */
const PROJECTION_WGSL = /* wgsl */ `
struct Params { tokens: u32, hidden: u32, outputs: u32, qkvOffset: u32 }
@group(0) @binding(0) var<uniform> params: Params;
@group(0) @binding(1) var<storage, read> hidden: array<f32>;
@group(0) @binding(2) var<storage, read> weight: array<f32>;
@group(0) @binding(3) var<storage, read_write> qkv: array<f32>;

@compute @workgroup_size(${WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3u) {
  let i = id.x;
  if (i >= params.tokens * params.outputs) { return; }
  let n = i / params.outputs;
  let o = i % params.outputs;
  var sum = 0.0;
  for (var j = 0u; j < params.hidden; j++) {
    sum += hidden[n * params.hidden + j] * weight[o * params.hidden + j];
  }
  qkv[params.qkvOffset + i] = sum;
}`;

/** The engine's model state: its weights and its K/V caches, at their byte offsets. */
export interface EngineBuffers {
  readonly weight: GPUBuffer;
  readonly kCache: GPUBuffer;
  readonly vCache: GPUBuffer;
}

/** One step's inputs in the engine's buffers: the fused projection (`SCENARIO.byteOffsets.qkv` bytes in), positions and slots. */
export interface StepBuffers {
  readonly qkv: GPUBuffer;
  readonly positions: GPUBuffer;
  readonly slots: GPUBuffer;
}

/** Bytes of a buffer holding `elements` 4-byte values `byteOffset` bytes in, rounded up as WebGPU sizes buffers. */
function bufferBytes(byteOffset: number, elements: number): number {
  return Math.ceil((byteOffset + 4 * Math.max(1, elements)) / 16) * 16;
}

const ENGINE_USAGE = STORAGE | COPY_SRC | COPY_DST;

/** A buffer the engine fills from the host at creation, `values` starting `byteOffset` bytes in. */
function filled(device: GPUDevice, label: string, byteOffset: number, values: Float32Array | Int32Array): GPUBuffer {
  const buffer = device.createBuffer({ label, size: bufferBytes(byteOffset, values.length), usage: ENGINE_USAGE, mappedAtCreation: true });
  new Uint8Array(buffer.getMappedRange()).set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), byteOffset);
  buffer.unmap();
  return buffer;
}

/** The weights and the caches, whose rows hold the prompts cached before the first step (seeded values). */
export function createEngine(device: GPUDevice): EngineBuffers {
  const { hidden, seeds, byteOffsets } = SCENARIO;
  return {
    weight: filled(device, 'engine qkv weight', 0, randomFloats(seeds.weight, QKV_WIDTH * hidden)),
    kCache: filled(device, 'engine K cache', byteOffsets.kCache, randomFloats(seeds.kCache, CACHE_ELEMENTS)),
    vCache: filled(device, 'engine V cache', byteOffsets.vCache, randomFloats(seeds.vCache, CACHE_ELEMENTS)),
  };
}

/** The engine's step up to attention: the step's hidden states uploaded, then its own pass writing the fused projection. Submitted at once. */
export function runProjection(device: GPUDevice, engine: EngineBuffers, step: number, positions: readonly number[], slots: readonly number[]): StepBuffers {
  const { hidden, seeds, byteOffsets } = SCENARIO;
  const tokens = positions.length;
  const input = filled(device, `engine hidden states, step ${step + 1}`, 0, randomFloats(seeds.hidden[step]!, tokens * hidden));
  const qkv = device.createBuffer({ label: `engine qkv, step ${step + 1}`, size: bufferBytes(byteOffsets.qkv, tokens * QKV_WIDTH), usage: ENGINE_USAGE });
  const params = device.createBuffer({ label: 'engine projection params', size: 16, usage: UNIFORM | COPY_DST });
  device.queue.writeBuffer(params, 0, new Uint32Array([tokens, hidden, QKV_WIDTH, byteOffsets.qkv / 4]));

  const module = device.createShaderModule({ label: 'engine projection', code: PROJECTION_WGSL });
  const pipeline = device.createComputePipeline({ label: 'engine projection', layout: 'auto', compute: { module, entryPoint: 'main' } });
  const encoder = device.createCommandEncoder({ label: 'engine projection' });
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(
    0,
    device.createBindGroup({
      layout: pipeline.getBindGroupLayout(0),
      entries: [params, input, engine.weight, qkv].map((buffer, binding) => ({ binding, resource: { buffer } })),
    }),
  );
  pass.dispatchWorkgroups(Math.ceil((tokens * QKV_WIDTH) / WORKGROUP));
  pass.end();
  device.queue.submit([encoder.finish()]);

  return {
    qkv,
    positions: filled(device, `engine positions, step ${step + 1}`, byteOffsets.positions, Int32Array.from(positions)),
    slots: filled(device, `engine slots, step ${step + 1}`, byteOffsets.slots, Int32Array.from(slots)),
  };
}

/** The engine's attention output, `SCENARIO.byteOffsets.out` bytes in, filled with `fill`. */
export function outputBuffer(device: GPUDevice, label: string, elements: number, fill: number): GPUBuffer {
  return filled(device, label, SCENARIO.byteOffsets.out, new Float32Array(elements).fill(fill));
}

/** A copy of the range into a buffer of the engine's, in a submit of its own: a snapshot for the read-back at the end. */
export function snapshot(device: GPUDevice, buffer: GPUBuffer, byteOffset: number, byteLength: number): { buffer: GPUBuffer; byteOffset: number; byteLength: number } {
  const copy = device.createBuffer({ label: 'engine snapshot', size: byteLength, usage: COPY_SRC | COPY_DST });
  const encoder = device.createCommandEncoder({ label: 'engine snapshot' });
  encoder.copyBufferToBuffer(buffer, byteOffset, copy, 0, byteLength);
  device.queue.submit([encoder.finish()]);
  return { buffer: copy, byteOffset: 0, byteLength };
}

/**
 * Copies each range into a MAP_READ buffer in one submit of the engine's
 * own, maps them, and returns their 32-bit words: the only read-back of the
 * page, after kvkit's calls (each submitted its work on these buffers).
 */
export async function readBack(device: GPUDevice, ranges: readonly { buffer: GPUBuffer; byteOffset: number; byteLength: number }[]): Promise<Uint32Array[]> {
  const encoder = device.createCommandEncoder({ label: 'engine read-back' });
  const staging = ranges.map((r) => {
    // copyBufferToBuffer moves multiples of 4 bytes from 4-aligned offsets: every range here is f32 or i32.
    const target = device.createBuffer({ label: 'engine read-back', size: Math.max(4, r.byteLength), usage: MAP_READ | COPY_DST });
    encoder.copyBufferToBuffer(r.buffer, r.byteOffset, target, 0, r.byteLength);
    return target;
  });
  device.queue.submit([encoder.finish()]);
  return Promise.all(
    staging.map(async (target, i) => {
      await target.mapAsync(MAP_MODE_READ);
      const words = new Uint32Array(target.getMappedRange(0, ranges[i]!.byteLength).slice(0));
      target.unmap();
      target.destroy();
      return words;
    }),
  );
}
