/**
 * The package tests' one way to run a few WGSL statements over words on the device: `body` reads
 * `input[i]` and writes `output[i]` for every i below `count` (the input's length unless given), after
 * `prelude`, with f16 converted as `f16` says. Returns the output words.
 */
import { halfFloatWgsl, INTEGER_F16 } from '../src/shaders/common.wgsl.js';
import type { F16Conversion } from '../src/shaders/common.wgsl.js';

export interface WordKernel {
  readonly body: string;
  readonly input: Uint32Array;
  readonly count?: number;
  readonly prelude?: string;
  readonly f16?: F16Conversion;
}

export async function runWordKernel(device: GPUDevice, k: WordKernel): Promise<Uint32Array> {
  const count = k.count ?? k.input.length;
  const module = device.createShaderModule({
    code: `${halfFloatWgsl(k.f16 ?? INTEGER_F16)}${k.prelude ?? ''}
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = id.y * n.x * 64u + id.x;
  if (i >= ${count}u) { return; }
  ${k.body}
}`,
  });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const src = device.createBuffer({ size: k.input.byteLength, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
  new Uint32Array(src.getMappedRange()).set(k.input);
  src.unmap();
  const bytes = count * 4;
  const dst = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const readback = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] }));
  const groups = Math.ceil(count / 64);
  pass.dispatchWorkgroups(Math.min(groups, 65535), Math.ceil(groups / 65535));
  pass.end();
  encoder.copyBufferToBuffer(dst, 0, readback, 0, bytes);
  device.queue.submit([encoder.finish()]);
  await readback.mapAsync(GPUMapMode.READ);
  const out = new Uint32Array(readback.getMappedRange().slice(0));
  readback.unmap();
  for (const b of [src, dst, readback]) b.destroy();
  return out;
}
