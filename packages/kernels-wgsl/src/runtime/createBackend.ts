import { defineBackend, describeBackend } from '@kvkit/contracts/backend';
import type { Backend } from '@kvkit/contracts';
import { ContractError } from '@kvkit/contracts';
import type { DeviceCaps } from '../shaders/plan.js';
import { findAdapter as probeAdapter, KERNEL_TOGGLES, noAdapterFix } from './adapter.js';
import { runProbe } from './deviceProbe.js';
import { chooseF16Conversion } from './f16Conversion.js';
import { GpuRuntime } from './gpuRuntime.js';
import { WebGpuKernels } from './webGpuKernels.js';
import { wrapFor } from './wrap.js';
import type { WebGpuBackend } from './wrap.js';

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

/** Backends by their public object: profiling hooks and stats reach the kernels through it. */
export const kernelsOf = new WeakMap<Backend, WebGpuKernels>();

/** The kernels behind a backend made by createWebGpuBackend(); KV044 for anything else. */
export function webGpuKernelsOf(backend: unknown, caller: string): WebGpuKernels {
  const kernels = typeof backend === 'object' && backend !== null ? kernelsOf.get(backend as Backend) : undefined;
  if (!kernels) throw new ContractError('KV044', caller, { arg: 'backend', expected: 'a backend made by createWebGpuBackend()', actual: describeBackend(backend) });
  return kernels;
}

/**
 * A WebGPU backend: on `options.device`, or on a device of its own from
 * `options.gpu`, `navigator.gpu` (browsers) or Dawn (Node, falling back to
 * SwiftShader where no GPU driver answers). No adapter: KV050.
 */
export async function createWebGpuBackend(options: WebGpuBackendOptions = {}): Promise<WebGpuBackend> {
  let device = options.device;
  let description = 'a device passed in';
  let adapterSubgroupMin: number | undefined;
  if (!device) {
    const adapter = await findAdapter(options);
    description = describeAdapter(adapter);
    adapterSubgroupMin = (adapter.info as { subgroupMinSize?: number } | undefined)?.subgroupMinSize;
    device = await requestDevice(adapter);
  } else {
    const info = (device as { adapterInfo?: GPUAdapterInfo }).adapterInfo;
    if (info) description = `${describeInfo(info)}, a device passed in`;
    adapterSubgroupMin = (info as { subgroupMinSize?: number } | undefined)?.subgroupMinSize;
  }
  const [subgroups, f16] = await Promise.all([
    options.useSubgroups !== false && device.features.has('subgroups') ? subgroupLayout(device) : undefined,
    chooseF16Conversion(device, options.f16Conversion),
  ]);
  const caps: DeviceCaps = {
    subgroups: subgroups !== undefined,
    subgroupMinSize: Math.min(subgroups ?? 0, adapterSubgroupMin ?? Infinity),
    maxWorkgroupStorageBytes: device.limits.maxComputeWorkgroupStorageSize,
    maxInvocationsPerWorkgroup: device.limits.maxComputeInvocationsPerWorkgroup,
    maxStorageBuffersPerStage: device.limits.maxStorageBuffersPerShaderStage,
    f16,
  };
  const runtime = new GpuRuntime(device, caps, device.features.has('timestamp-query'), options.batching === 'explicit');
  const kernels = new WebGpuKernels(runtime, options.device === undefined, description);
  const common = defineBackend(kernels);
  const backend: WebGpuBackend = { ...common, wrap: wrapFor(kernels, () => kernels.disposed) };
  kernelsOf.set(backend, kernels);
  return backend;
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

/** A device with what the kernels can use: subgroups and timestamps where offered, the adapter's largest buffers and workgroup memory. */
async function requestDevice(adapter: GPUAdapter): Promise<GPUDevice> {
  const wanted = (['subgroups', 'timestamp-query'] as const).filter((f) => adapter.features.has(f));
  const limits = adapter.limits;
  const requiredLimits: Record<string, number> = {
    maxBufferSize: limits.maxBufferSize,
    maxStorageBufferBindingSize: limits.maxStorageBufferBindingSize,
    maxComputeWorkgroupStorageSize: limits.maxComputeWorkgroupStorageSize,
    maxStorageBuffersPerShaderStage: limits.maxStorageBuffersPerShaderStage,
  };
  try {
    return await adapter.requestDevice({ requiredFeatures: wanted as GPUFeatureName[], requiredLimits });
  } catch {
    try {
      return await adapter.requestDevice();
    } catch (e) {
      throw noAdapter(`the adapter (${describeAdapter(adapter)}) gave no device: ${(e as Error)?.message ?? String(e)}`, 'Update the GPU driver, or use another adapter');
    }
  }
}

function describeInfo(info: GPUAdapterInfo): string {
  const chip = [info.vendor, info.architecture].filter(Boolean).join(' ');
  return [chip, info.description].filter(Boolean).join(' — ') || 'unnamed adapter';
}

function describeAdapter(adapter: GPUAdapter): string {
  const info = adapter.info;
  if (!info) return 'unnamed adapter';
  const text = describeInfo(info);
  return /swiftshader|llvmpipe|lavapipe/i.test(`${text} ${info.device}`) ? `${text}, software` : text;
}

/**
 * Runs a one-workgroup probe: subgroup kernels assume lane i of a workgroup
 * is lane i % size of its subgroup. Returns the subgroup size seen, or
 * undefined when the layout differs (the kernels then use workgroup memory).
 */
async function subgroupLayout(device: GPUDevice): Promise<number | undefined> {
  const lanes = 256;
  const words = await runProbe(
    device,
    `enable subgroups;
@group(0) @binding(0) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(${lanes})
fn main(@builtin(local_invocation_index) lane: u32, @builtin(subgroup_size) size: u32, @builtin(subgroup_invocation_id) id: u32) {
  out[2u * lane] = size;
  out[2u * lane + 1u] = id;
}`,
    2 * lanes,
    1,
  );
  if (!words) return undefined;
  let smallest = Infinity;
  for (let lane = 0; lane < lanes; lane++) {
    const size = words[2 * lane]!;
    if (size < 2 || (size & (size - 1)) !== 0 || words[2 * lane + 1] !== lane % size) return undefined;
    smallest = Math.min(smallest, size);
  }
  return smallest;
}
