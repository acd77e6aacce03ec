/**
 * kvkit inside a browser engine. The page (the engine) owns its GPUDevice
 * and every buffer; its own pass writes the fused qkv projection; kvkit
 * works on views of the engine's buffers in place and writes K and V into
 * the engine's own caches. Nothing is read back until the end: the
 * engine's own copy to MAP_READ buffers, with no `flush()` before it (a call
 * on the engine's buffers submits its work before it returns). The result
 * goes on `window.engineStep` (the test compares it with the CPU reference).
 */
import { createWebGpuBackend, gpuBufferOf, webGpuBackendStats } from '@kvkit/kernels-wgsl';
import type { WebGpuBackend } from '@kvkit/kernels-wgsl';
import type { Tensor } from '@kvkit/contracts';
import { readBack, runProjection } from './engine.js';
import type { EngineBuffers } from './engine.js';
import { CACHE_ELEMENTS, QKV_WIDTH, SCENARIO } from './scenario.js';
import type { EngineStepResult } from './scenario.js';

declare global {
  interface Window {
    engineStep?: EngineStepResult;
  }
}

interface StepTensors {
  readonly q: Tensor<'f32'>;
  readonly k: Tensor<'f32'>;
  readonly v: Tensor<'f32'>;
  readonly positions: Tensor<'i32'>;
  readonly slots: Tensor<'i32'>;
  readonly kPool: Tensor<'f32'>;
  readonly vPool: Tensor<'f32'>;
}

/** kvkit tensors over the engine's buffers, where they lie in them: no copy, nothing uploaded. */
function tensorsOver(backend: WebGpuBackend, buffers: EngineBuffers): StepTensors {
  const { tokens, numQoHeads, numKvHeads, headDim, slotsInCache, byteOffsets } = SCENARIO;
  const qkv = backend.wrap(buffers.qkv, 'f32', [tokens, QKV_WIDTH], { byteOffset: byteOffsets.qkv });
  const { q, k, v } = backend.splitQkv(qkv, { numQoHeads, numKvHeads, headDim });
  const cache = [slotsInCache, numKvHeads, headDim] as const;
  return {
    q,
    k,
    v,
    positions: backend.wrap(buffers.positions, 'i32', [tokens], { byteOffset: byteOffsets.positions }),
    slots: backend.wrap(buffers.slots, 'i32', [tokens], { byteOffset: byteOffsets.slots }),
    kPool: backend.wrap(buffers.kCache, 'f32', cache, { byteOffset: byteOffsets.kCache }),
    vPool: backend.wrap(buffers.vCache, 'f32', cache, { byteOffset: byteOffsets.vCache }),
  };
}

async function step(): Promise<EngineStepResult> {
  const adapter = await navigator.gpu?.requestAdapter();
  if (!adapter) return { ok: false, error: navigator.gpu ? 'navigator.gpu.requestAdapter() gave no adapter' : 'this browser has no navigator.gpu' };
  const device = await adapter.requestDevice();
  const buffers = runProjection(device);

  const backend = await createWebGpuBackend({ device });
  const t = tensorsOver(backend, buffers);
  const { numQoHeads, numKvHeads, headDim, rotaryDim, ropeStyle, ropeBase } = SCENARIO;
  const before = webGpuBackendStats(backend).submits;
  // It writes the engine's caches, so its work is in the queue when it returns, ahead of the engine's read-back below.
  const { qRot, kRot } = backend.ropePoolFused({ ...t, numQoHeads, numKvHeads, headDim, rotaryDim, ropeStyle, ropeBase });
  const submitsByCall = webGpuBackendStats(backend).submits - before;
  // Where kvkit says the tensors lie: in the engine's own buffers, nothing copied.
  const views = (
    [
      ['q', t.q, buffers.qkv],
      ['k', t.k, buffers.qkv],
      ['v', t.v, buffers.qkv],
      ['kPool', t.kPool, buffers.kCache],
      ['vPool', t.vPool, buffers.vCache],
    ] as const
  ).map(([name, tensor, engineBuffer]) => {
    const { buffer, byteOffset, strides } = gpuBufferOf(tensor);
    return { name, inEngineBuffer: buffer === engineBuffer, byteOffset, strides: [...strides] };
  });

  const range = (buffer: GPUBuffer, byteOffset: number, elements: number) => ({ buffer, byteOffset, byteLength: 4 * elements });
  const [qkvBits, kCacheBits, vCacheBits, qRotBits, kRotBits] = await readBack(device, [
    range(buffers.qkv, SCENARIO.byteOffsets.qkv, SCENARIO.tokens * QKV_WIDTH),
    range(buffers.kCache, SCENARIO.byteOffsets.kCache, CACHE_ELEMENTS),
    range(buffers.vCache, SCENARIO.byteOffsets.vCache, CACHE_ELEMENTS),
    gpuBufferOf(qRot),
    gpuBufferOf(kRot),
  ]);
  // Value errors (a slot past the cache) are recorded on the device and surface here.
  await backend.sync();
  const result: EngineStepResult = {
    ok: true,
    adapter: [adapter.info.vendor, adapter.info.architecture, adapter.info.description].filter(Boolean).join(' '),
    backend: backend.label,
    views,
    submitsByCall,
    qkvBits: [...qkvBits!],
    qRotBits: [...qRotBits!],
    kRotBits: [...kRotBits!],
    kCacheBits: [...kCacheBits!],
    vCacheBits: [...vCacheBits!],
  };
  backend.dispose(); // the engine's device and buffers stay the engine's
  return result;
}

const report = document.getElementById('report')!;
try {
  window.engineStep = await step();
} catch (e) {
  const error = e as { message?: string; code?: string };
  window.engineStep = { ok: false, error: error?.message ?? String(e), ...(error?.code ? { code: error.code } : {}) };
}
const shown = window.engineStep;
report.textContent = shown.ok
  ? `ropePoolFused ran on ${shown.adapter} (${shown.backend}):\n${SCENARIO.tokens} tokens written into the engine's K/V caches at slots ${SCENARIO.slots.join(', ')}.`
  : `failed: ${shown.error}`;
