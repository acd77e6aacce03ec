/**
 * The CUDA driver API, loaded from `libcuda.so.1` through koffi: no compiler
 * and no toolkit needed, only the NVIDIA driver. Only the calls that find
 * devices are bound here.
 */
import koffi from 'koffi';

export interface CudaDevice {
  readonly ordinal: number;
  readonly name: string;
  /** Compute capability as `major.minor`, e.g. `9.0` for Hopper. */
  readonly computeCapability: string;
  readonly totalMemoryBytes: number;
}

export type CudaProbe =
  | { readonly ok: true; readonly driverVersion: string; readonly devices: readonly CudaDevice[] }
  | { readonly ok: false; readonly reason: string };

const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
const CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;

/** The driver's library name on each platform. */
export const LIBCUDA = process.platform === 'win32' ? 'nvcuda.dll' : 'libcuda.so.1';

/** The CUDA devices here, or why there are none. Never throws. */
export function probeCuda(library = LIBCUDA): CudaProbe {
  let lib: ReturnType<typeof koffi.load>;
  try {
    lib = koffi.load(library);
  } catch {
    return { ok: false, reason: `no NVIDIA driver: ${library} could not be loaded. Install the NVIDIA driver (the CUDA toolkit is not needed).` };
  }
  try {
    const cuInit = lib.func('int cuInit(unsigned int flags)');
    const cuDriverGetVersion = lib.func('int cuDriverGetVersion(_Out_ int *version)');
    const cuDeviceGetCount = lib.func('int cuDeviceGetCount(_Out_ int *count)');
    const cuDeviceGet = lib.func('int cuDeviceGet(_Out_ int *device, int ordinal)');
    const cuDeviceGetName = lib.func('int cuDeviceGetName(_Out_ uint8_t *name, int len, int dev)');
    const cuDeviceGetAttribute = lib.func('int cuDeviceGetAttribute(_Out_ int *value, int attrib, int dev)');
    const cuDeviceTotalMem = lib.func('int cuDeviceTotalMem_v2(_Out_ size_t *bytes, int dev)');
    const cuGetErrorName = lib.func('int cuGetErrorName(int error, _Out_ const char **name)');
    const check = (what: string, status: number) => {
      if (status === 0) return;
      const name: (string | null)[] = [null];
      cuGetErrorName(status, name);
      throw new Error(`${what} failed: ${name[0] ?? `CUDA error ${status}`}`);
    };
    check('cuInit', cuInit(0));
    const version = [0];
    check('cuDriverGetVersion', cuDriverGetVersion(version));
    const count = [0];
    check('cuDeviceGetCount', cuDeviceGetCount(count));
    const devices: CudaDevice[] = [];
    for (let ordinal = 0; ordinal < count[0]!; ordinal++) {
      const dev = [0];
      check('cuDeviceGet', cuDeviceGet(dev, ordinal));
      const nameBuf = Buffer.alloc(256);
      check('cuDeviceGetName', cuDeviceGetName(nameBuf, nameBuf.length, dev[0]));
      const major = [0];
      const minor = [0];
      check('cuDeviceGetAttribute', cuDeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev[0]));
      check('cuDeviceGetAttribute', cuDeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev[0]));
      const bytes = [0];
      check('cuDeviceTotalMem', cuDeviceTotalMem(bytes, dev[0]));
      devices.push({
        ordinal,
        name: nameBuf.toString('utf8', 0, nameBuf.indexOf(0)),
        computeCapability: `${major[0]}.${minor[0]}`,
        totalMemoryBytes: Number(bytes[0]),
      });
    }
    if (devices.length === 0) return { ok: false, reason: 'the NVIDIA driver is loaded but reports no CUDA device' };
    const v = version[0]!;
    return { ok: true, driverVersion: `${Math.floor(v / 1000)}.${(v % 1000) / 10}`, devices };
  } catch (e) {
    return { ok: false, reason: (e as Error).message };
  }
}
