/**
 * The one choice of how kernels convert f16 on a device. WGSL leaves the
 * rounding of `pack2x16float`, its out-of-range results and the handling of
 * subnormals to the implementation, so the builtins are used only where one
 * small dispatch at start-up finds them giving the integer code's bits.
 */
import type { F16Conversion } from '../shaders/common.wgsl.js';
import { F16_PROBE_WGSL, F16_PROBE_WORKGROUPS } from '../shaders/f16Probe.wgsl.js';
import { runProbe } from './deviceProbe.js';

/** What the probe found per adapter (one chip and driver convert alike), so later backends on it skip the dispatch. */
const foundByAdapter = new Map<string, number>();

/** `forced` for both directions, or what the probe of `device` found exact; the integer code where the probe fails. */
export async function chooseF16Conversion(device: GPUDevice, forced?: 'builtin' | 'integer'): Promise<F16Conversion> {
  if (forced) return { decode: forced, encode: forced };
  const info = (device as { adapterInfo?: GPUAdapterInfo }).adapterInfo;
  const adapter = info ? [info.vendor, info.architecture, info.device, info.description].join('|') : undefined;
  let differs = adapter === undefined ? undefined : foundByAdapter.get(adapter);
  if (differs === undefined) {
    differs = await probeF16Builtins(device);
    if (adapter !== undefined && differs !== undefined) foundByAdapter.set(adapter, differs);
  }
  differs ??= 3;
  return { decode: differs & 1 ? 'integer' : 'builtin', encode: differs & 2 ? 'integer' : 'builtin' };
}

/** Bit 1: the builtin decode differs somewhere; bit 2: the encode does. Undefined where the probe could not run. */
async function probeF16Builtins(device: GPUDevice): Promise<number | undefined> {
  return (await runProbe(device, F16_PROBE_WGSL, 1, F16_PROBE_WORKGROUPS))?.[0];
}
