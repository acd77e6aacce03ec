/**
 * Every catalog example whose code the CPU backend can raise runs here, with
 * `backend` (a fresh CPU backend) and `createCpuBackend` in scope; the
 * examples of GPU start-up and driver codes run in their backend's package.
 */
import { allErrors } from '@kvkit/contracts/dsl';
import { catalog } from '@kvkit/errors-catalog';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { describe, expect, it } from 'vitest';
import { defineCatalogExamples, exampleBackendOf } from '../src/catalogExamples.js';

defineCatalogExamples('cpu', { scope: () => ({ backend: createCpuBackend(), createCpuBackend }) });

describe('catalog examples: where each runs', () => {
  it('every op code runs on the CPU; only start-up and driver codes need a GPU backend', () => {
    const live = catalog.filter((e) => !e.retired);
    const onGpu = live.filter((e) => exampleBackendOf(e) !== 'cpu').map((e) => e.code);
    expect(live.length - onGpu.length).toBeGreaterThan(40);
    // Codes of a GPU runtime are declared with the calls that raise them, never through a validator; an op's code
    // that only a GPU backend raises is declared as raised by that op's runtime.
    for (const code of onGpu) expect(live.find((e) => e.code === code)?.op === '*' || allErrors[code]?.raisedBy !== undefined, code).toBe(true);
  });
});
