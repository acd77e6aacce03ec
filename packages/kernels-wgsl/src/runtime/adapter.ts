/**
 * Finding a WebGPU adapter: `navigator.gpu` in browsers, Dawn (the `webgpu`
 * package) in Node. In Node, where no GPU driver answers, Dawn is started a
 * second time over SwiftShader's Vulkan driver (Debian's chromium package
 * ships it), so WebGPU still runs on the CPU.
 */
import { existsSync, readdirSync } from 'node:fs';

export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

export interface AdapterFound {
  readonly ok: true;
  readonly adapter: GPUAdapter;
  readonly description: string;
  /** True for a software rasteriser (SwiftShader): correct, but no measure of GPU speed. */
  readonly software: boolean;
  readonly features: readonly string[];
}

export interface AdapterMissing {
  readonly ok: false;
  /** Why none was found, and how to get one. */
  readonly reason: string;
}

export type AdapterProbe = AdapterFound | AdapterMissing;

// Dawn's instance must outlive every pending promise of the process: held here, never collected.
const dawnInstances: GPU[] = [];

async function dawn(env?: Record<string, string>): Promise<GPU> {
  if (env) Object.assign(process.env, env);
  const { create, globals } = await import('webgpu');
  Object.assign(globalThis, globals);
  const gpu = create([]);
  dawnInstances.push(gpu);
  return gpu;
}

function describe(adapter: GPUAdapter): { description: string; software: boolean } {
  const info = adapter.info;
  // vendor and architecture name the chip; description is the driver's own string.
  const chip = [info.vendor, info.architecture].filter(Boolean).join(' ');
  const description = [chip, info.description].filter(Boolean).join(' — ') || 'unnamed adapter';
  return { description, software: /swiftshader|llvmpipe|lavapipe/i.test(`${description} ${info.vendor} ${info.device}`) };
}

/** Vulkan ICD files where the loader looks by default; none means Dawn's own attempt can only fail (noisily). */
const ICD_DIRS = ['/usr/share/vulkan/icd.d', '/etc/vulkan/icd.d', '/usr/local/share/vulkan/icd.d'];

function vulkanDriverListed(): boolean {
  const env = process.env;
  if (env.VK_ICD_FILENAMES || env.VK_DRIVER_FILES || process.platform !== 'linux') return true;
  return ICD_DIRS.some((d) => existsSync(d) && readdirSync(d).some((f) => f.endsWith('.json')));
}

/** The best adapter here, or why there is none. Never throws. */
export async function probeWebGpu(options: { powerPreference?: GPUPowerPreference } = {}): Promise<AdapterProbe> {
  const browserGpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  const tries: (() => Promise<GPU>)[] = [];
  if (browserGpu) tries.push(async () => browserGpu);
  else if (typeof process !== 'undefined' && process.versions?.node) {
    if (vulkanDriverListed()) tries.push(() => dawn());
    if (!process.env.VK_ICD_FILENAMES && existsSync(SWIFTSHADER_ICD)) {
      tries.push(() => dawn({ VK_ICD_FILENAMES: SWIFTSHADER_ICD, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' }));
    }
  }
  const failures: string[] = [];
  for (const gpu of tries) {
    try {
      const adapter = await (await gpu()).requestAdapter({ powerPreference: options.powerPreference });
      if (adapter) return { ok: true, adapter, ...describe(adapter), features: [...adapter.features].sort() };
      failures.push('no adapter');
    } catch (e) {
      failures.push((e as Error).message);
    }
  }
  return {
    ok: false,
    reason:
      `no WebGPU adapter (${failures.join('; ') || 'no WebGPU in this runtime'}). ` +
      'Install a GPU driver with Vulkan support, or Debian\'s chromium package for SwiftShader ' +
      `(${SWIFTSHADER_ICD}), or set VK_ICD_FILENAMES to a Vulkan driver's ICD file.`,
  };
}
