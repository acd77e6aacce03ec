export { probeWebGpu, SWIFTSHADER_ICD } from './runtime/adapter.js';
export type { AdapterFound, AdapterMissing, AdapterProbe } from './runtime/adapter.js';
