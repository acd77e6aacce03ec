/**
 * The conformance and validation suites against the GPU backends named on the
 * command line, as `node:test` tests:
 *   node .device/bundle/conformance.mjs cuda webgpu
 * `cuda` runs with cuBLASLt where it loads and again with the package's own
 * GEMM, plus the CUDA-only checks of its package's tests (pools past 2^31
 * elements, reads past 4 GiB, application memory and streams, and tensor
 * parallelism over every device, which needs two). `cuda-faults` provokes
 * out of memory and an illegal address (which leaves the process's CUDA
 * context unusable): run it alone,
 *   node .device/bundle/conformance.mjs cuda-faults
 */
import { defineConformanceSuite, definePropertySuite, defineResourceSuite, defineValidationSuite } from '@kvkit/conformance';
import { createWebGpuBackend, webGpuBackendStats } from '@kvkit/kernels-wgsl';
// From the package's sources, like its checks: one module instance, so the checks recognise the backends made here.
import { createCudaBackend, cudaBackendInfo } from '../../../packages/kernels-cuda/src/index.js';
import { defineCudaChecks } from '../../../packages/kernels-cuda/test/cudaChecks.js';
import { defineCudaFaultChecks } from '../../../packages/kernels-cuda/test/cudaFaults.js';
import { defineCudaViewChecks } from '../../../packages/kernels-cuda/test/cudaViews.js';
import { defineExternalMemoryChecks } from '../../../packages/kernels-cuda/test/externalMemory.js';
import { defineFp8TieChecks } from '../../../packages/kernels-cuda/test/fp8Ties.js';
import { defineLargePoolChecks } from '../../../packages/kernels-cuda/test/largePools.js';
import { defineLargeReadChecks } from '../../../packages/kernels-cuda/test/largeReads.js';
import { cudaResourceOptions } from '../../../packages/kernels-cuda/test/resourceOptions.js';
import { defineTensorParallelChecks } from '../../../packages/kernels-cuda/test/tensorParallel.js';

const suites: Record<string, () => Promise<void>> = {
  cuda: async () => {
    const probe = await createCudaBackend();
    console.log(`cuda: ${JSON.stringify(cudaBackendInfo(probe))}`);
    probe.dispose();
    defineConformanceSuite('cuda', () => createCudaBackend());
    defineValidationSuite('cuda', () => createCudaBackend());
    definePropertySuite('cuda', () => createCudaBackend());
    defineResourceSuite('cuda', () => createCudaBackend(), cudaResourceOptions);
    defineConformanceSuite('cuda, package GEMM', () => createCudaBackend({ gemm: 'kvkit' }));
    defineCudaChecks(() => createCudaBackend());
    defineFp8TieChecks(() => createCudaBackend());
    defineLargePoolChecks(() => createCudaBackend());
    defineLargeReadChecks(() => createCudaBackend());
    defineExternalMemoryChecks();
    defineCudaViewChecks();
    defineTensorParallelChecks();
  },
  'cuda-faults': async () => {
    defineCudaFaultChecks(() => createCudaBackend(), { createWebGpuBackend: () => createWebGpuBackend({ powerPreference: 'high-performance' }) });
  },
  webgpu: async () => {
    const probe = await createWebGpuBackend({ powerPreference: 'high-performance' });
    console.log(`webgpu: ${probe.label}, f16 conversion ${JSON.stringify(webGpuBackendStats(probe).f16Conversion)}`);
    probe.dispose();
    defineConformanceSuite('webgpu', () => createWebGpuBackend({ powerPreference: 'high-performance' }));
    defineValidationSuite('webgpu', () => createWebGpuBackend({ powerPreference: 'high-performance' }));
    definePropertySuite('webgpu', () => createWebGpuBackend({ powerPreference: 'high-performance' }));
    defineResourceSuite('webgpu', () => createWebGpuBackend({ powerPreference: 'high-performance' }), { buffers: (b) => webGpuBackendStats(b).liveBuffers, buffersAreLive: true });
    defineConformanceSuite('webgpu, workgroup reductions', () => createWebGpuBackend({ powerPreference: 'high-performance', useSubgroups: false }));
  },
};

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !(name in suites));
if (asked.length === 0 || unknown.length > 0) {
  console.error(`usage: conformance.mjs ${Object.keys(suites).join('|')} ...${unknown.length ? ` (unknown: ${unknown.join(', ')})` : ''}`);
  process.exit(2);
}
if (asked.includes('cuda-faults') && asked.length > 1) {
  console.error('conformance.mjs: cuda-faults leaves the CUDA context unusable; run it in a process of its own');
  process.exit(2);
}
for (const name of asked) await (suites[name] as () => Promise<void>)();
