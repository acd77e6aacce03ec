/**
 * The catalog's examples for the WebGPU start-up, device-loss and memory codes
 * (KV050, KV051, KV054) run here, where createWebGpuBackend exists: each
 * `before` must throw exactly its code, each `after` must run clean.
 */
import { defineCatalogExamples } from '@kvkit/conformance/catalog-examples';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createWebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';

const found = await findAdapter({}, KERNEL_TOGGLES);

const scope = () => ({
    createWebGpuBackend,
    createCpuBackend,
    // The examples' own WebGPU entry point: a fresh adapter per request (an adapter gives one device).
    gpu: { requestAdapter: async () => ((await findAdapter({}, KERNEL_TOGGLES)) as { adapter?: GPUAdapter }).adapter ?? null },
});
const noAdapter = found.ok ? {} : { skipReason: `no WebGPU adapter here (${found.tried})` };

defineCatalogExamples('webgpu', { scope, ...noAdapter });
