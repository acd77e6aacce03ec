import { describe } from 'vitest';
import { createCudaBackend } from '../src/index.js';
import { defineCudaFaultChecks } from './cudaFaults.js';
import { gpu } from './helpers.js';

// A file of its own: vitest runs it in its own process, so the illegal address it provokes leaves the other files' context alone.
describe.skipIf(!gpu.ok)(`cuda faults on a GPU${gpu.ok ? '' : ` (skipped: ${gpu.reason})`}`, () => {
  defineCudaFaultChecks(() => createCudaBackend());
});
