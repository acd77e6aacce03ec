/**
 * `@kvkit/contracts`: what a user of kvkit types against: tensors, dtypes, the
 * typed op signatures, the public `Backend` and the `ContractError` it throws.
 * Backend authors import `@kvkit/contracts/backend`; generators and docs
 * `@kvkit/contracts/dsl`.
 */
export type { CreateKvMaterializerFn, FusedNormRopeStackedFn, RopePoolFusedFn } from './generated/backend.js';
export type * from './generated/signatures.js';
export { ContractError, isContractError } from './errors/contractError.js';
export { docsUrl, getDocsBase, setDocsBase } from './errors/docsUrl.js';
export type { Backend } from './runtime/backend.js';
export { DTYPES, FLOAT_DTYPES, INDEX_DTYPES, numel } from './tensor.js';
export type { BackendKind, DType, FloatDType, IndexDType, ReadResult, Shape, Tensor, TensorData } from './tensor.js';
export type { Check, ContractViolation } from './types/check.js';
