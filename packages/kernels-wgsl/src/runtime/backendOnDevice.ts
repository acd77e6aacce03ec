import { defineBackend } from '@kvkit/contracts/backend';
import { ContractError } from '@kvkit/contracts';
import type { DeviceCaps } from '../shaders/plan.js';
import type { WebGpuBackendOptions } from './createBackend.js';
import { runProbe } from './deviceProbe.js';
import { chooseF16Conversion } from './f16Conversion.js';
import { GpuRuntime } from './gpuRuntime.js';
import { kernelsOf } from './registry.js';
import { WebGpuKernels } from './webGpuKernels.js';
import { wrapFor } from './wrap.js';
import type { WebGpuBackend } from './wrap.js';

/**
 * The backend's code, loaded by createWebGpuBackend (runtime/createBackend.ts)
 * while it asks for the adapter: the device, its probes, the runtime and the
 * kernels of every op.
 */
/** The backend on `options.device`, or on a device of `adapter` (found by the entry while this chunk loaded). */
export async function backendOnDevice(options: WebGpuBackendOptions, adapter: GPUAdapter | undefined): Promise<WebGpuBackend> {
  let device = options.device;
  let description = 'a device passed in';
  let adapterSubgroupMin: number | undefined;
  if (!device) {
    const found = adapter!;
    description = describeAdapter(found);
    adapterSubgroupMin = (found.info as { subgroupMinSize?: number } | undefined)?.subgroupMinSize;
    device = await requestDevice(found);
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
  return new ContractError('KV050', 'createWebGpuBackend', { reason, fix });
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
