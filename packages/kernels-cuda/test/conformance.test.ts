import { defineConformanceSuite, definePropertySuite, defineResourceSuite, defineValidationSuite } from '@kvkit/conformance';
import { describe } from 'vitest';
import { createCudaBackend } from '../src/index.js';
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
  defineCudaChecks(() => createCudaBackend());
  defineFp8TieChecks(() => createCudaBackend());
  defineLargePoolChecks(() => createCudaBackend());
  defineLargeReadChecks(() => createCudaBackend());
  defineExternalMemoryChecks();
  defineCudaViewChecks();
});

// Skips by itself, saying how many devices it found.
defineTensorParallelChecks();
