export { createCudaBackend, streamOf } from './runtime/createCudaBackend.js';
export type { CudaBackendOptions } from './runtime/createCudaBackend.js';
export type { StreamHandle } from './runtime/callerStream.js';
export { wrapDeviceMemory } from './runtime/wrapDeviceMemory.js';
export type { DevicePointer } from './runtime/wrapDeviceMemory.js';
export { LIBCUDA, probeCuda } from './runtime/driver.js';
export type { CudaDevice, CudaProbe } from './runtime/driver.js';
export { cudaBackendInfo } from './runtime/info.js';
export type { CudaBackendInfo } from './runtime/info.js';
