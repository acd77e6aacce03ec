import { defineConformanceSuite, definePropertySuite, defineResourceSuite, defineValidationSuite } from '@kvkit/conformance';
import { afterAll, beforeAll, describe } from 'vitest';
import { createCudaBackend } from '../src/index.js';
import { MATERIALIZER_SCHEDULES, tuning } from '../src/profiling.js';
import { defineCudaChecks } from './cudaChecks.js';
import { defineCudaViewChecks } from './cudaViews.js';
import { defineExternalMemoryChecks } from './externalMemory.js';
import { defineFp8TieChecks } from './fp8Ties.js';
import { gpu } from './helpers.js';
import { defineLargePoolChecks } from './largePools.js';
import { defineLargeReadChecks } from './largeReads.js';
import { cudaResourceOptions } from './resourceOptions.js';
import { defineTensorParallelChecks } from './tensorParallel.js';

const why = gpu.ok ? '' : ` (skipped: ${gpu.reason})`;

describe.skipIf(!gpu.ok)(`cuda on a GPU${why}`, () => {
  defineConformanceSuite('cuda', () => createCudaBackend());
  defineValidationSuite('cuda', () => createCudaBackend());
  definePropertySuite('cuda', () => createCudaBackend());
  defineResourceSuite('cuda', () => createCudaBackend(), cudaResourceOptions);
  defineConformanceSuite('cuda, package GEMM', () => createCudaBackend({ gemm: 'kvkit' }));
  // The materializer's schedule other than the default (src/ops/tuning.ts) under the shared value and rejected-call suites.
  const other = MATERIALIZER_SCHEDULES.find((s) => s !== tuning.materializerSchedule)!;
  describe(`cuda, ${other} materializer`, () => {
    const before = { ...tuning };
    beforeAll(() => {
      // At every token count, so the suites' small calls take it too.
      Object.assign(tuning, { materializerSchedule: other, overlapMinTokens: 0 });
    });
    afterAll(() => {
      Object.assign(tuning, before);
    });
    defineConformanceSuite(`cuda, ${other} materializer`, () => createCudaBackend());
    defineValidationSuite(`cuda, ${other} materializer`, () => createCudaBackend());
  });
  defineCudaChecks(() => createCudaBackend());
  defineFp8TieChecks(() => createCudaBackend());
  defineLargePoolChecks(() => createCudaBackend());
  defineLargeReadChecks(() => createCudaBackend());
  defineExternalMemoryChecks();
  defineCudaViewChecks();
});

// Skips by itself, saying how many devices it found.
defineTensorParallelChecks();
