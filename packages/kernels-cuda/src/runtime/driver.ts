/**
 * The CUDA driver API, loaded from `libcuda.so.1` through koffi: no compiler
 * and no toolkit needed, only the NVIDIA driver.
 */
import koffi from 'koffi';
import type { LibraryHandle } from 'koffi';
import type { ContractError } from '@kvkit/contracts';
import { cudaCallFailed } from './errors.js';

/** A CUDA device as the driver reports it. */
export interface CudaDevice {
  /** Its ordinal: the `device` option of `createCudaBackend`. */
  readonly ordinal: number;
  /** The product name, e.g. `NVIDIA H200`. */
  readonly name: string;
  /** Compute capability as `major.minor`, e.g. `9.0` for Hopper. */
  readonly computeCapability: string;
  /** Device memory, in bytes. */
  readonly totalMemoryBytes: number;
}

/** What `probeCuda()` found: the driver's version and the devices, or why there are none. */
export type CudaProbe =
  | { readonly ok: true; readonly driverVersion: string; readonly devices: readonly CudaDevice[] }
  | { readonly ok: false; readonly reason: string };

/** Device attributes (CUdevice_attribute). */
export const ATTRIBUTE = {
  maxSharedMemoryPerBlock: 8,
  multiprocessorCount: 16,
  maxSharedMemoryPerMultiprocessor: 81,
  reservedSharedMemoryPerBlock: 111,
  computeCapabilityMajor: 75,
  computeCapabilityMinor: 76,
  memoryPoolsSupported: 115,
} as const;

/** Pointer attributes (CUpointer_attribute) that wrapDeviceMemory reads. */
export const POINTER_ATTRIBUTE = {
  context: 1,
  memoryType: 2,
  deviceOrdinal: 9,
  rangeStart: 11,
  rangeSize: 12,
} as const;

/** CUmemorytype: what CU_POINTER_ATTRIBUTE_MEMORY_TYPE reports. */
export const MEMORY_TYPE = { host: 1, device: 2, array: 3, unified: 4 } as const;

/** cuEventQuery's "still running". */
export const CUDA_ERROR_NOT_READY = 600;

/**
 * Errors after which the context answers every later call with the same
 * error (a kernel faulted, or the device did): illegal and misaligned
 * addresses, illegal instructions, traps and asserts, launch timeouts,
 * uncorrectable ECC errors.
 */
const STICKY_ERRORS = new Set([214, 700, 702, 710, 714, 715, 716, 717, 718, 719]);

/** Said after the driver's text when an error leaves the context unusable. */
const UNUSABLE_CONTEXT = 'the CUDA context is unusable after this error: every later call on this device fails, so dispose of the CUDA backends and restart the process';

/** The driver's library name on each platform. */
export const LIBCUDA = process.platform === 'win32' ? 'nvcuda.dll' : 'libcuda.so.1';

/** A bound C function. */
export type Fn = ReturnType<LibraryHandle['func']>;

/** Every driver entry point the backend calls, bound once. Handles are bigints, device pointers numbers. */
export class CudaDriver {
  readonly cuInit: Fn;
  readonly cuDriverGetVersion: Fn;
  readonly cuDeviceGetCount: Fn;
  readonly cuDeviceGet: Fn;
  readonly cuDeviceGetName: Fn;
  readonly cuDeviceGetAttribute: Fn;
  readonly cuDeviceTotalMem: Fn;
  readonly cuDevicePrimaryCtxRetain: Fn;
  readonly cuDevicePrimaryCtxRelease: Fn;
  readonly cuCtxSetCurrent: Fn;
  readonly cuCtxGetCurrent: Fn;
  readonly cuCtxPushCurrent: Fn;
  readonly cuCtxPopCurrent: Fn;
  readonly cuCtxGetDevice: Fn;
  readonly cuStreamGetCtx: Fn;
  readonly cuPointerGetAttributes: Fn;
  readonly cuStreamCreate: Fn;
  readonly cuStreamDestroy: Fn;
  readonly cuStreamSynchronize: Fn;
  readonly cuStreamWaitEvent: Fn;
  readonly cuEventCreate: Fn;
  readonly cuEventDestroy: Fn;
  readonly cuEventRecord: Fn;
  readonly cuEventQuery: Fn;
  readonly cuEventElapsedTime: Fn;
  readonly cuMemAlloc: Fn;
  readonly cuMemFree: Fn;
  readonly cuMemAllocAsync: Fn;
  readonly cuMemFreeAsync: Fn;
  readonly cuDeviceGetDefaultMemPool: Fn;
  readonly cuMemPoolSetAttribute: Fn;
  readonly cuMemPoolTrimTo: Fn;
  readonly cuMemHostAlloc: Fn;
  readonly cuMemFreeHost: Fn;
  readonly cuMemHostRegister: Fn;
  readonly cuMemHostUnregister: Fn;
  readonly cuMemcpyHtoDAsync: Fn;
  readonly cuMemcpyDtoHAsync: Fn;
  readonly cuMemcpyDtoDAsync: Fn;
  readonly cuMemsetD8Async: Fn;
  readonly cuModuleLoadData: Fn;
  readonly cuModuleUnload: Fn;
  readonly cuModuleGetFunction: Fn;
  readonly cuFuncSetAttribute: Fn;
  readonly cuOccupancyMaxActiveBlocksPerMultiprocessor: Fn;
  readonly cuLaunchKernel: Fn;
  /** Absent from drivers before CUDA 11.8: launches then take cuLaunchKernel. */
  readonly cuLaunchKernelEx: Fn | undefined;
  readonly #cuGetErrorName: Fn;
  readonly #cuGetErrorString: Fn;
  /** The first sticky error a call returned (its CUDA_ERROR_… name): from then on the context only fails. */
  faulted: string | undefined;

  /** Throws (koffi's error) when `lib` lacks an entry point: the caller reports that as "not a usable driver". */
  constructor(lib: LibraryHandle) {
    const f = (decl: string) => lib.func(decl);
    this.cuInit = f('int cuInit(unsigned int flags)');
    this.cuDriverGetVersion = f('int cuDriverGetVersion(_Out_ int *version)');
    this.cuDeviceGetCount = f('int cuDeviceGetCount(_Out_ int *count)');
    this.cuDeviceGet = f('int cuDeviceGet(_Out_ int *device, int ordinal)');
    this.cuDeviceGetName = f('int cuDeviceGetName(_Out_ uint8_t *name, int len, int dev)');
    this.cuDeviceGetAttribute = f('int cuDeviceGetAttribute(_Out_ int *value, int attrib, int dev)');
    this.cuDeviceTotalMem = f('int cuDeviceTotalMem_v2(_Out_ size_t *bytes, int dev)');
    this.cuDevicePrimaryCtxRetain = f('int cuDevicePrimaryCtxRetain(_Out_ void **ctx, int dev)');
    this.cuDevicePrimaryCtxRelease = f('int cuDevicePrimaryCtxRelease_v2(int dev)');
    this.cuCtxSetCurrent = f('int cuCtxSetCurrent(void *ctx)');
    this.cuCtxGetCurrent = f('int cuCtxGetCurrent(_Out_ void **ctx)');
    this.cuCtxPushCurrent = f('int cuCtxPushCurrent_v2(void *ctx)');
    this.cuCtxPopCurrent = f('int cuCtxPopCurrent_v2(_Out_ void **ctx)');
    this.cuCtxGetDevice = f('int cuCtxGetDevice(_Out_ int *device)');
    this.cuStreamGetCtx = f('int cuStreamGetCtx(void *stream, _Out_ void **ctx)');
    // The plural form answers null values for an address the driver does not know, where the singular fails.
    this.cuPointerGetAttributes = f('int cuPointerGetAttributes(unsigned int count, const int *attributes, void *data, uint64_t ptr)');
    this.cuStreamCreate = f('int cuStreamCreate(_Out_ void **stream, unsigned int flags)');
    this.cuStreamDestroy = f('int cuStreamDestroy_v2(void *stream)');
    this.cuStreamSynchronize = f('int cuStreamSynchronize(void *stream)');
    this.cuStreamWaitEvent = f('int cuStreamWaitEvent(void *stream, void *event, unsigned int flags)');
    this.cuEventCreate = f('int cuEventCreate(_Out_ void **event, unsigned int flags)');
    this.cuEventDestroy = f('int cuEventDestroy_v2(void *event)');
    this.cuEventRecord = f('int cuEventRecord(void *event, void *stream)');
    this.cuEventQuery = f('int cuEventQuery(void *event)');
    this.cuEventElapsedTime = firstOf(lib, ['int cuEventElapsedTime_v2(_Out_ float *ms, void *start, void *end)', 'int cuEventElapsedTime(_Out_ float *ms, void *start, void *end)']);
    this.cuMemAlloc = f('int cuMemAlloc_v2(void *dptr, size_t bytes)');
    this.cuMemFree = f('int cuMemFree_v2(uint64_t dptr)');
    this.cuMemAllocAsync = f('int cuMemAllocAsync(void *dptr, size_t bytes, void *stream)');
    this.cuMemFreeAsync = f('int cuMemFreeAsync(uint64_t dptr, void *stream)');
    this.cuDeviceGetDefaultMemPool = f('int cuDeviceGetDefaultMemPool(_Out_ void **pool, int dev)');
    this.cuMemPoolSetAttribute = f('int cuMemPoolSetAttribute(void *pool, int attr, void *value)');
    this.cuMemPoolTrimTo = f('int cuMemPoolTrimTo(void *pool, size_t minBytesToKeep)');
    this.cuMemHostAlloc = f('int cuMemHostAlloc(_Out_ void **p, size_t bytes, unsigned int flags)');
    this.cuMemFreeHost = f('int cuMemFreeHost(void *p)');
    this.cuMemHostRegister = f('int cuMemHostRegister_v2(void *p, size_t bytes, unsigned int flags)');
    this.cuMemHostUnregister = f('int cuMemHostUnregister(void *p)');
    this.cuMemcpyHtoDAsync = f('int cuMemcpyHtoDAsync_v2(uint64_t dst, void *src, size_t bytes, void *stream)');
    this.cuMemcpyDtoHAsync = f('int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t bytes, void *stream)');
    this.cuMemcpyDtoDAsync = f('int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t bytes, void *stream)');
    this.cuMemsetD8Async = f('int cuMemsetD8Async(uint64_t dst, uint8_t value, size_t count, void *stream)');
    this.cuModuleLoadData = f('int cuModuleLoadData(_Out_ void **module, void *image)');
    this.cuModuleUnload = f('int cuModuleUnload(void *module)');
    this.cuModuleGetFunction = f('int cuModuleGetFunction(_Out_ void **fn, void *module, const char *name)');
    this.cuFuncSetAttribute = f('int cuFuncSetAttribute(void *fn, int attrib, int value)');
    this.cuOccupancyMaxActiveBlocksPerMultiprocessor = f('int cuOccupancyMaxActiveBlocksPerMultiprocessor(_Out_ int *blocks, void *fn, int blockSize, size_t sharedBytes)');
    this.cuLaunchKernel = f(
      'int cuLaunchKernel(void *fn, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int sharedBytes, void *stream, void *params, void *extra)',
    );
    this.cuLaunchKernelEx = optional(lib, 'int cuLaunchKernelEx(void *config, void *fn, void *params, void *extra)');
    this.#cuGetErrorName = f('int cuGetErrorName(int error, _Out_ const char **name)');
    this.#cuGetErrorString = f('int cuGetErrorString(int error, _Out_ const char **text)');
  }

  /** `CUDA_ERROR_OUT_OF_MEMORY`, or `CUDA error 2` for a code the driver does not name. */
  errorName(status: number): string {
    const name: (string | null)[] = [null];
    return this.#cuGetErrorName(status, name) === 0 && name[0] ? name[0] : `CUDA error ${status}`;
  }

  errorText(status: number): string {
    const text: (string | null)[] = [null];
    return this.#cuGetErrorString(status, text) === 0 && text[0] ? text[0] : 'the driver gave no description';
  }

  /** Throws KV053 for a non-zero status. */
  check(op: string, call: string, status: number): void {
    if (status !== 0) throw this.failure(op, call, status);
  }

  /** KV053 for a failed call; a sticky error is remembered, and its message says the context is gone. */
  failure(op: string, call: string, status: number): ContractError {
    const name = this.errorName(status);
    const text = this.errorText(status);
    if (!STICKY_ERRORS.has(status)) return cudaCallFailed(op, call, name, text);
    this.faulted ??= name;
    return cudaCallFailed(op, call, name, `${text}; ${UNUSABLE_CONTEXT}`);
  }
}

function optional(lib: LibraryHandle, decl: string): Fn | undefined {
  try {
    return lib.func(decl);
  } catch {
    return undefined;
  }
}

function firstOf(lib: LibraryHandle, decls: readonly string[]): Fn {
  let last: unknown;
  for (const decl of decls) {
    try {
      return lib.func(decl);
    } catch (e) {
      last = e;
    }
  }
  throw last;
}

/** Loads the driver library; undefined when it is absent (no NVIDIA driver here). */
export function loadDriverLibrary(library = LIBCUDA): LibraryHandle | undefined {
  try {
    return koffi.load(library);
  } catch {
    return undefined;
  }
}

/** The CUDA devices here, or why there are none. Never throws. */
export function probeCuda(library = LIBCUDA): CudaProbe {
  const lib = loadDriverLibrary(library);
  if (!lib) return { ok: false, reason: `no NVIDIA driver: ${library} could not be loaded. Install the NVIDIA driver (the CUDA toolkit is not needed).` };
  try {
    const cu = new CudaDriver(lib);
    const check = (what: string, status: number) => {
      if (status !== 0) throw new Error(`${what} failed: ${cu.errorName(status)}`);
    };
    check('cuInit', cu.cuInit(0));
    const version = [0];
    check('cuDriverGetVersion', cu.cuDriverGetVersion(version));
    const count = [0];
    check('cuDeviceGetCount', cu.cuDeviceGetCount(count));
    const devices: CudaDevice[] = [];
    for (let ordinal = 0; ordinal < count[0]!; ordinal++) devices.push(describeDevice(cu, ordinal, check));
    if (devices.length === 0) return { ok: false, reason: 'the NVIDIA driver is loaded but reports no CUDA device' };
    const v = version[0]!;
    return { ok: true, driverVersion: `${Math.floor(v / 1000)}.${(v % 1000) / 10}`, devices };
  } catch (e) {
    const message = (e as Error).message;
    // A library without the driver's entry points is not the driver.
    return { ok: false, reason: message.includes('failed:') ? message : `${library} is not a usable CUDA driver: cuInit could not be called (${message})` };
  }
}

/** Name, compute capability and memory of one device. */
export function describeDevice(cu: CudaDriver, ordinal: number, check: (what: string, status: number) => void): CudaDevice {
  const dev = [0];
  check('cuDeviceGet', cu.cuDeviceGet(dev, ordinal));
  const nameBuf = Buffer.alloc(256);
  check('cuDeviceGetName', cu.cuDeviceGetName(nameBuf, nameBuf.length, dev[0]));
  const major = [0];
  const minor = [0];
  check('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(major, ATTRIBUTE.computeCapabilityMajor, dev[0]));
  check('cuDeviceGetAttribute', cu.cuDeviceGetAttribute(minor, ATTRIBUTE.computeCapabilityMinor, dev[0]));
  const bytes = [0];
  check('cuDeviceTotalMem', cu.cuDeviceTotalMem(bytes, dev[0]));
  return {
    ordinal,
    name: nameBuf.toString('utf8', 0, nameBuf.indexOf(0)),
    computeCapability: `${major[0]}.${minor[0]}`,
    totalMemoryBytes: Number(bytes[0]),
  };
}
