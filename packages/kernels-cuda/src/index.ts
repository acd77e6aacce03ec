export { LIBCUDA, probeCuda } from './runtime/driver.js';
export type { CudaDevice, CudaProbe } from './runtime/driver.js';
