import { ContractError } from '@kvkit/contracts';
import { defineBackend, describeValue } from '@kvkit/contracts/backend';
import type { Backend } from '@kvkit/contracts';
import { resolveCallerStream, streamHandle } from './callerStream.js';
import type { CallerStream, StreamHandle } from './callerStream.js';
import { CudaContext } from './context.js';
import { CublasLt } from './cublasLt.js';
import { CudaKernels } from './cudaKernels.js';
import { CudaDriver, describeDevice, LIBCUDA, loadDriverLibrary } from './driver.js';
import { cudaUnavailable } from './errors.js';
import { loadFatbin } from './fatbin.js';
import { cudaKernelsOf, register } from './registry.js';

/** Options of `createCudaBackend`: the device, the application's stream, the kernels' fatbin, the GEMM and the driver. */
export interface CudaBackendOptions {
  /** Device ordinal (default 0; with `stream`, the stream's device). */
  readonly device?: number;
  /**
   * A `CUstream` the application made: kvkit enqueues all its work there, in
   * the stream's context, in order with the application's own work. The
   * application keeps the stream and its context alive until `dispose()`;
   * kvkit never destroys either.
   */
  readonly stream?: StreamHandle;
  /** The kernels' fatbin; default: KVKIT_CUDA_FATBIN, else the one shipped in the package (or beside a bundle). */
  readonly fatbinPath?: string;
  /** The projection GEMM: 'auto' (cuBLASLt when it loads, the default; KVKIT_CUDA_GEMM=kvkit overrides) or 'kvkit' (always the package's own). */
  readonly gemm?: 'auto' | 'kvkit';
  /** The driver library (default libcuda.so.1). */
  readonly driverLibrary?: string;
}

const NO_CUDA_FIX = 'use createCpuBackend() from @kvkit/kernels-cpu (or createWebGpuBackend()) on this machine';

/**
 * A backend on an NVIDIA GPU, driven through the CUDA driver API. Rejects at
 * once with KV052 where there is no driver, no device, or no kernels (a
 * package built without nvcc), and with KV053 when a driver call fails.
 */
export async function createCudaBackend(options: CudaBackendOptions = {}): Promise<Backend> {
  const library = options.driverLibrary ?? LIBCUDA;
  const lib = loadDriverLibrary(library);
  if (!lib) throw cudaUnavailable(`no NVIDIA driver: ${library} could not be loaded`, `install the NVIDIA driver (the CUDA toolkit is not needed), or ${NO_CUDA_FIX}`);
  let cu: CudaDriver;
  try {
    cu = new CudaDriver(lib);
  } catch (e) {
    throw cudaUnavailable(`${library} is not a usable CUDA driver (${(e as Error).message})`, `install a current NVIDIA driver, or ${NO_CUDA_FIX}`);
  }
  const init = cu.cuInit(0);
  if (init !== 0) throw cudaUnavailable(`cuInit failed with ${cu.errorName(init)} (${cu.errorText(init)})`, `check that an NVIDIA GPU is visible here (nvidia-smi), or ${NO_CUDA_FIX}`);
  const count = [0];
  const counted = cu.cuDeviceGetCount(count);
  if (counted !== 0 || count[0] === 0) throw cudaUnavailable('the NVIDIA driver is loaded but reports no CUDA device', `check CUDA_VISIBLE_DEVICES and nvidia-smi, or ${NO_CUDA_FIX}`);
  const caller = options.stream === undefined ? undefined : callerStream(cu, options.stream, count[0]!, options.device);
  const ordinal = caller?.ordinal ?? options.device ?? 0;
  if (!Number.isInteger(ordinal) || ordinal < 0 || ordinal >= count[0]!) {
    throw cudaUnavailable(`device ${String(ordinal)} was asked for; the driver reports ${count[0]} device(s), ordinals 0..${count[0]! - 1}`, 'pass a device ordinal the driver lists');
  }
  const device = describeDevice(cu, ordinal, (call, status) => cu.check('createCudaBackend', call, status));
  if (Number(device.computeCapability.split('.')[0]) < 8) {
    throw cudaUnavailable(`${device.name} has compute capability ${device.computeCapability}; the kernels need 8.0 (Ampere) or newer`, NO_CUDA_FIX);
  }
  const fatbin = await loadFatbin(options.fatbinPath);
  if ('looked' in fatbin) {
    throw cudaUnavailable(
      `this @kvkit/kernels-cuda was built without kernels: no kvkit.fatbin at ${fatbin.looked.join(', ')} (nvcc was not found when it was built)`,
      'install the published package, rebuild it where nvcc is on PATH, or point options.fatbinPath (or KVKIT_CUDA_FATBIN) at a kvkit.fatbin',
    );
  }
  const cx = new CudaContext(cu, ordinal, fatbin.image, caller);
  const wantsOwnGemm = (options.gemm ?? process.env.KVKIT_CUDA_GEMM ?? 'auto') === 'kvkit';
  const gemm = wantsOwnGemm ? { reason: 'the package GEMM was asked for' } : CublasLt.open();
  const kernels = new CudaKernels(cx, device, gemm);
  const backend = defineBackend(kernels);
  register(backend, kernels);
  return backend;
}

/** The application's stream, its context and device; a `device` option naming another device is refused (KV044). */
function callerStream(cu: CudaDriver, stream: unknown, deviceCount: number, device: number | undefined): CallerStream {
  const caller = resolveCallerStream(cu, streamHandle(stream), deviceCount);
  if (device !== undefined && device !== caller.ordinal) {
    throw new ContractError('KV044', 'createCudaBackend', { arg: 'device', expected: `the stream's device, ${caller.ordinal} (or no device option)`, actual: describeValue(device) });
  }
  return caller;
}

/**
 * The `CUstream` kvkit enqueues on: the application's (the `stream` option)
 * or the one the backend made. The application may enqueue its own work
 * there, or record an event to wait on from its streams; it never destroys
 * a stream kvkit made (that one lives until `backend.dispose()`).
 */
export function streamOf(backend: Backend): bigint {
  return cudaKernelsOf(backend, 'streamOf').cx.stream;
}
