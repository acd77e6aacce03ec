/**
 * The catalog examples that need a GPU backend, on the GPU host: KV053
 * (a failing CUDA driver call) and the WebGPU start-up codes, as node:test
 * tests:  node .device/bundle/catalog-examples.mjs [cuda|webgpu]
 * run.sh runs each backend in a process of its own. In one process, after
 * KV053's example had driven CUDA out of memory, Vulkan created no device: the
 * CUDA memory pool kept its peak once the backend was gone. Dispose now trims
 * the pool (conformance.mjs cuda-faults checks Vulkan after CUDA).
 */
import { defineCatalogExamples } from '@kvkit/conformance/catalog-examples';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend } from '@kvkit/kernels-cuda';
import { createWebGpuBackend, probeWebGpu } from '@kvkit/kernels-wgsl';

/** The WebGPU entry point a Node application would hold: Dawn, through the package's own discovery. */
const gpu = {
  requestAdapter: async () => {
    const found = await probeWebGpu({ powerPreference: 'high-performance' });
    return found.ok ? found.adapter : null;
  },
};

const asked = process.argv.slice(2);
const wanted = (name: string) => asked.length === 0 || asked.includes(name);
if (wanted('cuda')) defineCatalogExamples('cuda', { codes: ['KV053'], scope: () => ({ backend: createCpuBackend(), createCpuBackend, createCudaBackend }) });
if (wanted('webgpu')) defineCatalogExamples('webgpu', { scope: () => ({ backend: createCpuBackend(), createCpuBackend, createWebGpuBackend, gpu }) });
