import { defineConformanceSuite, definePropertySuite, defineResourceSuite, defineValidationSuite } from '@kvkit/conformance';
import { describe } from 'vitest';
import { createCudaBackend } from '../src/index.js';
import { defineCudaChecks } from './cudaChecks.js';
import { defineCudaViewChecks } from './cudaViews.js';
import { defineExternalMemoryChecks } from './externalMemory.js';
import { gpu } from './helpers.js';
import { defineLargePoolChecks } from './largePools.js';
import { cudaResourceOptions } from './resourceOptions.js';

const why = gpu.ok ? '' : ` (skipped: ${gpu.reason})`;

describe.skipIf(!gpu.ok)(`cuda on a GPU${why}`, () => {
  defineConformanceSuite('cuda', () => createCudaBackend());
  defineValidationSuite('cuda', () => createCudaBackend());
  definePropertySuite('cuda', () => createCudaBackend());
  defineResourceSuite('cuda', () => createCudaBackend(), cudaResourceOptions);
  defineConformanceSuite('cuda, package GEMM', () => createCudaBackend({ gemm: 'kvkit' }));
  defineCudaChecks(() => createCudaBackend());
  defineLargePoolChecks(() => createCudaBackend());
  defineExternalMemoryChecks();
  defineCudaViewChecks();
});
