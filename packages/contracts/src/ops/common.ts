import { errors } from '../dsl/declare.js';
import type { CallDecl } from '../dsl/declare.js';

/** Codes every op can raise: argument form, tensor identity, dtypes, and the parameters shared by all ops. */
export const commonErrors = errors({
  KV001: { title: 'Argument is not a kvkit tensor', message: '{arg} must be a kvkit Tensor; got {actual}' },
  KV002: { title: 'Tensor from another backend', message: '{arg} was made by {actual}; this call runs on {expected}' },
  KV003: { title: 'Tensor used after dispose', message: '{arg} was disposed and can no longer be used' },
  KV004: { title: 'Unsupported dtype', message: '{arg} has dtype {actual}; expected one of {expected}' },
  KV005: { title: 'Dtypes that must agree do not', message: '{arg} has dtype {actual}; expected {expected} to match {other}' },
  KV006: { title: 'Parameter is not a positive integer', message: '{arg} must be a positive integer; got {actual}' },
  KV007: { title: 'Invalid rotary dim for the head dim', message: 'rotaryDim must be even and in (0, headDim]; got rotaryDim={actual}, headDim={expected}' },
  KV008: { title: 'Number out of range', message: '{arg} must be a finite number {constraint}; got {actual}' },
  KV009: { title: 'Unknown option value', message: '{arg} must be one of {expected}; got {actual}' },
});

/** Codes of tensor creation and of calls as a whole. */
export const tensorErrors = errors({
  KV040: { title: 'Invalid tensor shape', message: 'shape {actual} is invalid: every dim must be a non-negative integer' },
  KV041: { title: 'Data length does not match the shape', message: 'data has {actual} elements; shape {shape} holds {expected}' },
  KV042: { title: 'Data not representable in the dtype', message: 'data[{index}] = {actual} is not representable as {expected}' },
  KV043: { title: 'Unknown argument', message: '{arg} is not an argument of {op}; expected one of {expected}' },
  KV044: { title: 'Argument of the wrong kind', message: '{arg} must be {expected}; got {actual}' },
  KV045: { title: 'Tensor too large', message: 'shape {actual} holds {count} elements; one tensor holds at most {expected}' },
});

/** Every call a GPU backend runs can meet a lost device or a failing driver call. */
const GPU_CALLS = ['tensor', 'empty', 'read', 'fusedNormRopeStacked', 'createKvMaterializer', 'KvMaterializer.materialize', 'KvMaterializer.materializeInto', 'ropePoolFused', 'sync'] as const;

/** Codes of a GPU backend's runtime rather than of a contract: no device, a lost device, a failing driver call. */
export const deviceErrors = errors({
  KV050: { title: 'No WebGPU adapter', message: 'no WebGPU adapter is available: {reason}. {fix}', raisedBy: ['createWebGpuBackend'] },
  KV051: { title: 'WebGPU device lost', message: 'the WebGPU device was lost ({reason}); this backend cannot run work any more. {fix}', raisedBy: GPU_CALLS },
  KV052: { title: 'No CUDA device', message: 'CUDA is not available: {reason}. {fix}', raisedBy: ['createCudaBackend'] },
  KV053: { title: 'CUDA driver call failed', message: '{call} failed with {error}: {reason}', raisedBy: ['createCudaBackend', ...GPU_CALLS, 'dispose'] },
  KV054: { title: 'WebGPU device out of memory', message: 'the WebGPU device ran out of memory: {reason}. {fix}', raisedBy: ['sync'] },
});

/** Codes `Call.tensor` raises for any tensor argument: not a tensor, another backend's, disposed, a layer view used late. */
export const TENSOR_IDENTITY = ['KV001', 'KV002', 'KV003', 'KV027'] as const;

/** The backend's calls besides the ops, checked in src/runtime/tensors.ts, with the codes each raises. */
export const tensorCalls: readonly CallDecl[] = [
  { name: 'tensor', summary: 'A tensor of the given dtype and shape, from data when given.', raises: ['KV004', 'KV040', 'KV045', 'KV001', 'KV041', 'KV042'] },
  { name: 'empty', summary: 'A tensor of the given dtype and shape, its contents unspecified.', raises: ['KV004', 'KV040', 'KV045'] },
  { name: 'read', summary: 'A copy of the data of a live tensor of this backend.', raises: TENSOR_IDENTITY },
];
