/**
 * createWebGpuBackend as a page loads it up front: the options, and the
 * adapter search, run while the backend's code (backendOnDevice.ts and all it
 * imports) loads as a chunk of its own. Op calls are synchronous, so every
 * kernel they may need is in that chunk, loaded before the backend exists.
 */
import { ContractError } from '@kvkit/contracts';
import { findAdapter as probeAdapter, KERNEL_TOGGLES, noAdapterFix } from './adapter.js';
import type { WebGpuBackend } from './wrap.js';

export { kernelsOf, webGpuKernelsOf } from './registry.js';

/** Options of `createWebGpuBackend`: whose device it runs on, and how it records and submits work. */
export interface WebGpuBackendOptions {
  /** Run on this device (shared with the application); the backend never destroys it. */
  readonly device?: GPUDevice;
  /** Which adapter to ask for when the backend makes its own device. */
  readonly powerPreference?: GPUPowerPreference;
  /** The WebGPU entry point to ask for an adapter, instead of `navigator.gpu` (browsers) or Dawn (Node). */
  readonly gpu?: { requestAdapter(options?: GPURequestAdapterOptions): Promise<GPUAdapter | null> };
  /** Reduce head rows with subgroup shuffles where the device has `subgroups` (default true); false forces workgroup memory. */
  readonly useSubgroups?: boolean;
  /**
   * How kernels convert f16: by default `unpack2x16float` / `pack2x16float` where a probe at creation finds
   * them giving the integer code's bits, else the integer code. 'builtin' or 'integer' forces one (for tests).
   */
  readonly f16Conversion?: 'builtin' | 'integer';
  /**
   * When recorded work is submitted. 'auto' (the default): ops batch, but a call whose work reads or writes a
   * buffer the application can reach (one it wrapped, or one `gpuBufferOf` handed it) submits the batch before it
   * returns, so the application's next `queue.submit` runs after it. 'explicit': every call batches until
   * `flush()`, `read()`, `sync()` or 256 dispatches; call `flush()` before each submit of your own that touches
   * those buffers, or it runs ahead of kvkit's work.
   */
  readonly batching?: WebGpuBatching;
}

/** `WebGpuBackendOptions.batching`: 'auto' submits work on the application's buffers before the call returns; 'explicit' leaves every submit to `flush()`. */
export type WebGpuBatching = 'auto' | 'explicit';

const OP = 'createWebGpuBackend';

/**
 * A WebGPU backend: on `options.device`, or on a device of its own from
 * `options.gpu`, `navigator.gpu` (browsers) or Dawn (Node, falling back to
 * SwiftShader where no GPU driver answers). No adapter: KV050.
 */
export async function createWebGpuBackend(options: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  const [core, adapter] = await Promise.all([import('./backendOnDevice.js'), options.device ? undefined : findAdapter(options)]);
  return core.backendOnDevice(options, adapter);
}

function noAdapter(reason: string, fix: string): ContractError {
  return new ContractError('KV050', OP, { reason, fix });
}

async function findAdapter(options: WebGpuBackendOptions): Promise<GPUAdapter> {
  const fix = noAdapterFix();
  if (options.gpu) {
    let adapter: GPUAdapter | null = null;
    let why = 'requestAdapter() of the WebGPU entry point passed as options.gpu returned null';
    try {
      adapter = await options.gpu.requestAdapter(options.powerPreference ? { powerPreference: options.powerPreference } : undefined);
    } catch (e) {
      why = `requestAdapter() of the WebGPU entry point passed as options.gpu failed: ${(e as Error)?.message ?? String(e)}`;
    }
    if (!adapter) throw noAdapter(why, fix);
    return adapter;
  }
  const probe = await probeAdapter(options.powerPreference ? { powerPreference: options.powerPreference } : {}, KERNEL_TOGGLES);
  if (!probe.ok) throw noAdapter(`none was found (${probe.tried})`, probe.fix);
  return probe.adapter;
}
