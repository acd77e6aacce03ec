import { cpuBackendStats, createCpuBackend } from '@kvkit/kernels-cpu';
import { defineResourceSuite } from '../src/index.js';

defineResourceSuite('cpu', createCpuBackend, { buffers: (b) => cpuBackendStats(b).buffersAllocated, buffersAreLive: false });
