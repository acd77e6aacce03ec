/**
 * Finding a WebGPU adapter: `navigator.gpu` in browsers, Dawn (the `webgpu`
 * package) in Node. In Node, where no GPU driver answers, Dawn is started a
 * second time over SwiftShader's Vulkan driver (Debian's chromium package
 * ships it), so WebGPU still runs on the CPU.
 */
export const SWIFTSHADER_ICD = '/usr/lib/chromium/vk_swiftshader_icd.json';

/** `probeWebGpu()` found an adapter. */
export interface AdapterFound {
  /** True: an adapter was found. */
  readonly ok: true;
  /** The adapter itself (in Node, from the Dawn instance the probe started). */
  readonly adapter: GPUAdapter;
  /** Its vendor, architecture and description, as messages and labels print it. */
  readonly description: string;
  /** True for a software rasteriser (SwiftShader): correct, but no measure of GPU speed. */
  readonly software: boolean;
  /** The WebGPU features it offers (`shader-f16`, `subgroups`, `timestamp-query`, ...). */
  readonly features: readonly string[];
}

/** `probeWebGpu()` found no adapter: why, what was tried and how to get one. */
export interface AdapterMissing {
  /** False: no adapter here. */
  readonly ok: false;
  /** Why none was found, and how to get one. */
  readonly reason: string;
  /** Why none was found: what each attempt answered. */
  readonly tried: string;
  /** How to get an adapter. */
  readonly fix: string;
}

/** What `probeWebGpu()` answers: an adapter (`ok: true`) or why there is none. */
export type AdapterProbe = AdapterFound | AdapterMissing;

/** Where the backend runs decides how to get an adapter: Node needs a Vulkan driver for Dawn, a browser needs WebGPU on. */
export type WebGpuRuntime = 'node' | 'browser';

export function currentRuntime(): WebGpuRuntime {
  return typeof process !== 'undefined' && process.versions?.node ? 'node' : 'browser';
}

/** How to get a WebGPU adapter where there is none (KV050's `{fix}`): no Debian or Vulkan advice in a browser. */
export function noAdapterFix(runtime: WebGpuRuntime = currentRuntime()): string {
  if (runtime === 'browser') {
    return 'Use a browser that has WebGPU switched on (current Chrome or Edge; Safari or Firefox where their WebGPU is enabled), on a page served over HTTPS or from localhost, with a GPU it does not blocklist; or fall back to @kvkit/kernels-cpu';
  }
  return `Install a GPU driver with Vulkan support, or, without a GPU, Debian's chromium package for SwiftShader (${SWIFTSHADER_ICD}), or set VK_ICD_FILENAMES to a Vulkan driver's ICD file; or fall back to @kvkit/kernels-cpu`;
}

/**
 * Dawn toggles of the instance the backend itself runs on (never the one
 * `probeWebGpu` hands out, so an application's own shaders keep WGSL's
 * guarantees): timestamps unquantized, for the profiling hooks; no zero-fill
 * of workgroup memory, which every kvkit kernel writes before reading and
 * which SwiftShader compiles in time proportional to the array size.
 */
export const KERNEL_TOGGLES: readonly string[] = ['disable-dawn-features=timestamp_quantization', 'enable-dawn-features=disable_workgroup_init'];

// Module names held in variables, so browser bundlers do not try to resolve Node-only modules.
const DAWN_MODULE = 'webgpu';
const NODE_FS = 'node:fs';
/** Dawn for Node: an optional peer dependency (browsers have WebGPU), at the version the package is tested with. */
export const DAWN_PACKAGE = 'webgpu@0.6.2';

/** KV050's fix when Node cannot load Dawn. */
export const DAWN_MISSING_FIX = `Install Dawn beside @kvkit/kernels-wgsl: npm install ${DAWN_PACKAGE} (an optional peer dependency, so that browser projects do not download it)`;

type Dawn = typeof import('webgpu');
let dawnModule: Promise<Dawn> | undefined;

/** Dawn's module, loaded once; a load that failed is tried again by the next probe. */
function loadDawn(): Promise<Dawn> {
  dawnModule ??= (import(/* @vite-ignore */ DAWN_MODULE) as Promise<Dawn>).catch((e: unknown) => {
    dawnModule = undefined;
    throw e;
  });
  return dawnModule;
}

// Dawn's instances must outlive every pending promise of the process: held here, never collected.
const dawnInstances = new Map<string, GPU>();

async function dawn(toggles: readonly string[], env?: Record<string, string>): Promise<GPU> {
  if (env) Object.assign(process.env, env);
  const key = `${toggles.join(' ')}|${process.env.VK_ICD_FILENAMES ?? ''}`;
  const held = dawnInstances.get(key);
  if (held) return held;
  const { create, globals } = await loadDawn();
  Object.assign(globalThis, globals);
  const gpu = create([...toggles]);
  dawnInstances.set(key, gpu);
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

async function vulkanDriverListed(fs: typeof import('node:fs')): Promise<boolean> {
  const env = process.env;
  if (env.VK_ICD_FILENAMES || env.VK_DRIVER_FILES || process.platform !== 'linux') return true;
  return ICD_DIRS.some((d) => fs.existsSync(d) && fs.readdirSync(d).some((f) => f.endsWith('.json')));
}

/** The best adapter here, or why there is none. Never throws. */
export async function probeWebGpu(options: { powerPreference?: GPUPowerPreference } = {}): Promise<AdapterProbe> {
  return findAdapter(options, []);
}

/** probeWebGpu, with Dawn (in Node) started with `toggles`. */
export async function findAdapter(options: { powerPreference?: GPUPowerPreference }, toggles: readonly string[]): Promise<AdapterProbe> {
  const browserGpu = (globalThis as { navigator?: { gpu?: GPU } }).navigator?.gpu;
  const tries: (() => Promise<GPU>)[] = [];
  if (browserGpu) tries.push(async () => browserGpu);
  else if (currentRuntime() === 'node') {
    try {
      await loadDawn();
    } catch (e) {
      const tried = `the ${DAWN_MODULE} package (Dawn) did not load: ${(e as Error)?.message ?? String(e)}`;
      return { ok: false, reason: `no WebGPU adapter (${tried}). ${DAWN_MISSING_FIX}.`, tried, fix: DAWN_MISSING_FIX };
    }
    const fs = (await import(/* @vite-ignore */ NODE_FS)) as typeof import('node:fs');
    if (await vulkanDriverListed(fs)) tries.push(() => dawn(toggles));
    if (!process.env.VK_ICD_FILENAMES && fs.existsSync(SWIFTSHADER_ICD)) {
      tries.push(() => dawn(toggles, { VK_ICD_FILENAMES: SWIFTSHADER_ICD, XDG_RUNTIME_DIR: process.env.XDG_RUNTIME_DIR ?? '/tmp' }));
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
  const tried = failures.join('; ') || 'no WebGPU in this runtime';
  const fix = noAdapterFix();
  return { ok: false, reason: `no WebGPU adapter (${tried}). ${fix}.`, tried, fix };
}
