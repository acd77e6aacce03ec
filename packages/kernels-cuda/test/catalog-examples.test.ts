/**
 * The catalog examples of the CUDA start-up and driver codes. KV052's needs a
 * machine without a CUDA device (CI); KV053's needs one with a device.
 */
import { defineCatalogExamples } from '@kvkit/conformance/catalog-examples';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend, probeCuda } from '../src/index.js';

const probe = probeCuda();
const hasDevice = probe.ok && probe.devices.length > 0;
const scope = () => ({ backend: createCpuBackend(), createCpuBackend, createCudaBackend });

defineCatalogExamples('cuda', {
  codes: ['KV052'],
  scope,
  ...(hasDevice ? { skipReason: 'this machine has a CUDA device; the example shows a machine without one' } : {}),
});
defineCatalogExamples('cuda', {
  codes: ['KV053'],
  scope,
  ...(hasDevice ? {} : { skipReason: `no CUDA device here (${probe.ok ? 'the driver lists none' : probe.reason})` }),
});
