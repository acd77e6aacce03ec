/**
 * The cross-backend suites on a GPU host, under node:test (bundled by
 * device/bundle.mjs): cuda with cuBLASLt where it loads, the validation
 * suite, and cuda with the package's own GEMM.
 */
import { defineConformanceSuite, defineValidationSuite } from '@kvkit/conformance';
import { createCudaBackend, cudaBackendInfo } from '../src/index.js';
import { defineCudaChecks } from '../test/cudaChecks.js';

const probe = await createCudaBackend();
console.log(JSON.stringify(cudaBackendInfo(probe)));
probe.dispose();

const only = process.argv[2];
if (!only || only === 'cuda') defineConformanceSuite('cuda', () => createCudaBackend());
if (!only || only === 'validation') defineValidationSuite('cuda', () => createCudaBackend());
if (!only || only === 'kvkit-gemm') defineConformanceSuite('cuda, package GEMM', () => createCudaBackend({ gemm: 'kvkit' }));
if (!only || only === 'cuda' || only === 'checks') defineCudaChecks(() => createCudaBackend());
