import { decodeBf16, decodeF16, encodeHalves } from '@kvkit/contracts/backend';
import { afterAll, describe, expect, it } from 'vitest';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { HALF_FLOAT_WGSL } from '../src/shaders/common.wgsl.js';

// The host codec is tested in @kvkit/contracts; here, that the shaders' own conversions agree with it.

const probe = await findAdapter({}, KERNEL_TOGGLES);
const device = probe.ok ? await probe.adapter.requestDevice() : undefined;
afterAll(() => device?.destroy());

/** Runs `body` (WGSL statements using `input[i]` and writing `output[i]`) over `input` on the device. */
async function onDevice(body: string, input: Uint32Array): Promise<Uint32Array> {
  if (!device) throw new Error('no adapter');
  const module = device.createShaderModule({
    code: `${HALF_FLOAT_WGSL}
@group(0) @binding(0) var<storage, read> input: array<u32>;
@group(0) @binding(1) var<storage, read_write> output: array<u32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) n: vec3<u32>) {
  let i = id.y * n.x * 64u + id.x;
  if (i >= arrayLength(&input)) { return; }
  ${body}
}`,
  });
  const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module, entryPoint: 'main' } });
  const bytes = input.byteLength;
  const src = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE, mappedAtCreation: true });
  new Uint32Array(src.getMappedRange()).set(input);
  src.unmap();
  const dst = device.createBuffer({ size: bytes, usage: GPUBufferUsage.STORAGE | GPUBufferUsage.COPY_SRC });
  const readback = device.createBuffer({ size: bytes, usage: GPUBufferUsage.MAP_READ | GPUBufferUsage.COPY_DST });
  const encoder = device.createCommandEncoder();
  const pass = encoder.beginComputePass();
  pass.setPipeline(pipeline);
  pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: src } }, { binding: 1, resource: { buffer: dst } }] }));
  const groups = Math.ceil(input.length / 64);
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

function f32Bits(x: number): number {
  return new Uint32Array(Float32Array.of(x).buffer)[0]!;
}

describe.skipIf(!probe.ok)(`device conversions (WGSL) agree with the host${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('decodes every f16 and bf16 bit pattern exactly', async () => {
    const all = Uint32Array.from({ length: 65536 }, (_, h) => h);
    const [f16, bf16] = await Promise.all([
      onDevice('output[i] = bitcast<u32>(f16ToF32(input[i]));', all),
      onDevice('output[i] = bitcast<u32>(bf16ToF32(input[i]));', all),
    ]);
    const bad: string[] = [];
    for (let h = 0; h < 65536; h++) {
      const wantF16 = decodeF16(h);
      const wantBf16 = decodeBf16(h);
      if (Number.isNaN(wantF16) ? (f16[h]! & 0x7fffffff) <= 0x7f800000 : f16[h] !== f32Bits(wantF16)) bad.push(`f16 0x${h.toString(16)}`);
      if (Number.isNaN(wantBf16) ? (bf16[h]! & 0x7fffffff) <= 0x7f800000 : bf16[h] !== f32Bits(wantBf16)) bad.push(`bf16 0x${h.toString(16)}`);
    }
    expect(bad.slice(0, 10)).toEqual([]);
  });

  it('rounds f32 to f16 and bf16 to nearest even, subnormals and overflow included', async () => {
    // Finite f32 patterns: the f16 subnormal and normal ranges densely, ties, and random ones.
    const patterns: number[] = [];
    for (let b = 0x33000000; b <= 0x33800000; b += 0x1001) patterns.push(b); // around half the smallest f16 subnormal
    for (let b = 0x38000000; b <= 0x39000000; b += 0x801) patterns.push(b); // subnormal/normal f16 boundary
    for (let b = 0x477f0000; b <= 0x47800000; b += 0x11) patterns.push(b); // the top of the f16 range
    for (const base of [0x3f800000, 0x40490000, 0x3c000000]) {
      patterns.push(base | 0x1000, base | 0x3000, base | 0x1001, base | 0x8000, base | 0x18000, base | 0x7fff);
    }
    let x = 12345;
    for (let i = 0; i < 100000; i++) {
      x ^= x << 13;
      x ^= x >>> 17;
      x ^= x << 5;
      if (((x >>> 23) & 0xff) !== 0xff) patterns.push(x >>> 0);
    }
    const input = Uint32Array.from(patterns, (p) => p >>> 0);
    const withSigns = Uint32Array.from([...input, ...Array.from(input, (p) => (p ^ 0x80000000) >>> 0)]);
    const [f16, bf16] = await Promise.all([
      onDevice('output[i] = f32ToF16(bitcast<f32>(input[i]));', withSigns),
      onDevice('output[i] = f32ToBf16(bitcast<f32>(input[i]));', withSigns),
    ]);
    const hostF16 = new Uint16Array(withSigns.length);
    const hostBf16 = new Uint16Array(withSigns.length);
    encodeHalves('f16', new Float32Array(withSigns.buffer), hostF16);
    encodeHalves('bf16', new Float32Array(withSigns.buffer), hostBf16);
    const bad: string[] = [];
    withSigns.forEach((bits, i) => {
      // A device may flush f32 subnormal inputs to zero: both answers are then the signed zero.
      const flushed = (bits & 0x7f800000) === 0;
      const wantF16 = hostF16[i]!;
      if (f16[i] !== wantF16 && !(flushed && (f16[i]! & 0x7fff) === 0)) bad.push(`f16(0x${bits.toString(16)}) = 0x${f16[i]!.toString(16)}, want 0x${wantF16.toString(16)}`);
      const wantBf16 = hostBf16[i]!;
      if (bf16[i] !== wantBf16 && !(flushed && (bf16[i]! & 0x7fff) === 0)) bad.push(`bf16(0x${bits.toString(16)}) = 0x${bf16[i]!.toString(16)}, want 0x${wantBf16.toString(16)}`);
    });
    expect(bad.slice(0, 10)).toEqual([]);
  });
});
