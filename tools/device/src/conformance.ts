/**
 * The conformance and validation suites against the GPU backends named on the
 * command line (`cuda`, `webgpu`), as `node:test` tests:
 *   node .device/bundle/conformance.mjs cuda webgpu
 */
import { defineConformanceSuite, defineValidationSuite } from '@kvkit/conformance';
import type { Backend } from '@kvkit/contracts';
import { createCudaBackend } from '@kvkit/kernels-cuda';
import { createWebGpuBackend } from '@kvkit/kernels-wgsl';

const backends: Record<string, () => Promise<Backend>> = {
  cuda: () => createCudaBackend(),
  webgpu: () => createWebGpuBackend(),
};

const asked = process.argv.slice(2);
const unknown = asked.filter((name) => !(name in backends));
if (asked.length === 0 || unknown.length > 0) {
  console.error(`usage: conformance.mjs ${Object.keys(backends).join('|')} ...${unknown.length ? ` (unknown: ${unknown.join(', ')})` : ''}`);
  process.exit(2);
}
for (const name of asked) {
  const create = backends[name] as () => Promise<Backend>;
  defineConformanceSuite(name, create, { dtypes: ['f32', 'f16', 'bf16'] });
  defineValidationSuite(name, create);
}
