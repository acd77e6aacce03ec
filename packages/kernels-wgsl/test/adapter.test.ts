import { existsSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { probeWebGpu, SWIFTSHADER_ICD } from '../src/index.js';

const probe = await probeWebGpu();
if (!probe.ok) console.log(`kernels-wgsl: device tests skipped on this machine: ${probe.reason}`);
let device: GPUDevice | undefined;
afterAll(() => device?.destroy());

describe('probeWebGpu', () => {
  it('finds an adapter wherever SwiftShader is installed, or says how to get one', () => {
    if (existsSync(SWIFTSHADER_ICD)) expect(probe.ok).toBe(true);
    if (!probe.ok) expect(probe.reason).toMatch(/chromium|VK_ICD_FILENAMES/);
  });

  it.runIf(probe.ok)('gives an adapter whose device runs a compute shader', async () => {
    if (!probe.ok) return;
    device = await probe.adapter.requestDevice();
    const n = 1000;
    const input = Float32Array.from({ length: n }, (_, i) => i * 0.5 - 7);
    const data = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC | GPUBufferUsage.COPY_DST });
    device.queue.writeBuffer(data, 0, input);
    const module = device.createShaderModule({
      code: `@group(0) @binding(0) var<storage, read_write> x: array<f32>;
             @compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3u) {
               if (id.x < arrayLength(&x)) { x[id.x] = fma(x[id.x], 3.0, 1.0); }
             }`,
    });
    const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
    const readback = device.createBuffer({ size: n * 4, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
    const enc = device.createCommandEncoder();
    const pass = enc.beginComputePass();
    pass.setPipeline(pipeline);
    pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: data } }] }));
    pass.dispatchWorkgroups(Math.ceil(n / 64));
    pass.end();
    enc.copyBufferToBuffer(data, 0, readback, 0, n * 4);
    device.queue.submit([enc.finish()]);
    await readback.mapAsync(GPUMapMode.READ);
    const out = new Float32Array(readback.getMappedRange().slice(0));
    readback.unmap();
    expect(Array.from(out)).toEqual(Array.from(input, (v) => Math.fround(v * 3 + 1)));
  });
});
