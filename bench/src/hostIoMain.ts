/**
 * `pnpm --filter @kvkit/bench host-io`: the host codec, then tensor() and
 * read() per dtype on every backend that starts here (one that does not is
 * skipped, saying why):
 *   pnpm --filter @kvkit/bench host-io [--backends cpu,webgpu,cuda] [--elements 16777216] [--repeats 3]
 */
import { cpus } from 'node:os';
import { parseArgs } from 'node:util';
import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { createCudaBackend } from '@kvkit/kernels-cuda';
import { createWebGpuBackend } from '@kvkit/kernels-wgsl';
import { hostIoTable, measureBackendIo, measureCodec } from './hostIo.js';
import type { HostIoRow } from './hostIo.js';

const { values } = parseArgs({
  options: {
    backends: { type: 'string', default: 'cpu,webgpu,cuda' },
    elements: { type: 'string', default: String(16 * 1024 * 1024) },
    repeats: { type: 'string', default: '3' },
  },
});
const n = Number(values.elements);
const repeats = Number(values.repeats);
const factories: Record<string, () => Promise<Backend>> = {
  cpu: async () => createCpuBackend(),
  webgpu: () => createWebGpuBackend({ powerPreference: 'high-performance' }),
  cuda: () => createCudaBackend(),
};

console.log(`host I/O, ${n} elements, ${repeats} repeats; ${cpus()[0]?.model ?? 'unknown CPU'}, Node ${process.version}`);
const rows: HostIoRow[] = await measureCodec(n, repeats);
for (const name of (values.backends ?? '').split(',').filter(Boolean)) {
  const make = factories[name];
  if (!make) {
    console.log(`${name}: skipped: not a backend (cpu, webgpu, cuda)`);
    continue;
  }
  let backend: Backend;
  try {
    backend = await make();
  } catch (e) {
    console.log(`${name}: skipped: ${e instanceof Error ? e.message.split('\n')[0] : String(e)}`);
    continue;
  }
  try {
    rows.push(...(await measureBackendIo(`${name} (${backend.label})`, backend, n, repeats)));
  } finally {
    backend.dispose();
  }
}
console.log(`\n${hostIoTable(rows)}`);
