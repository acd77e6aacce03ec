/**
 * A start-up probe: one dispatch of a small shader that writes what it finds
 * into a zeroed u32 buffer at binding 0, read back. Inside an error scope of
 * its own, so a device shared with the application hears nothing of it.
 */
export async function runProbe(device: GPUDevice, code: string, words: number, workgroups: number): Promise<Uint32Array | undefined> {
  const bytes = words * 4;
  const answer = device.createBuffer({ size: bytes, usage: 0x0080 | 0x0004 }); // STORAGE | COPY_SRC
  const readback = device.createBuffer({ size: bytes, usage: 0x0001 | 0x0008 }); // MAP_READ | COPY_DST
  let scope: Promise<GPUError | null> | undefined;
  try {
    device.pushErrorScope('validation');
    try {
      const pipeline = device.createComputePipeline({ layout: 'auto', compute: { module: device.createShaderModule({ code }), entryPoint: 'main' } });
      const encoder = device.createCommandEncoder();
      const pass = encoder.beginComputePass();
      pass.setPipeline(pipeline);
      pass.setBindGroup(0, device.createBindGroup({ layout: pipeline.getBindGroupLayout(0), entries: [{ binding: 0, resource: { buffer: answer } }] }));
      pass.dispatchWorkgroups(workgroups);
      pass.end();
      encoder.copyBufferToBuffer(answer, 0, readback, 0, bytes);
      device.queue.submit([encoder.finish()]);
    } finally {
      scope = device.popErrorScope();
    }
    const [, error] = await Promise.all([readback.mapAsync(0x0001), scope]); // MAP_READ
    const found = new Uint32Array(readback.getMappedRange().slice(0));
    readback.unmap();
    return error ? undefined : found;
  } catch {
    await scope?.catch(() => {});
    return undefined;
  } finally {
    answer.destroy();
    readback.destroy();
  }
}
