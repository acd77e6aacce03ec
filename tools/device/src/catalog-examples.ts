/**
 * The catalog examples that need a GPU backend, on the GPU host: KV053
 * (a failing CUDA driver call) and the WebGPU start-up codes, as node:test
 * tests:  node .device/bundle/catalog-examples.mjs
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

defineCatalogExamples('cuda', { codes: ['KV053'], scope: () => ({ backend: createCpuBackend(), createCpuBackend, createCudaBackend }) });
defineCatalogExamples('webgpu', { scope: () => ({ backend: createCpuBackend(), createCpuBackend, createWebGpuBackend, gpu }) });
