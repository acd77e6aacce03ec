/**
 * `@kvkit/contracts`: what a user of kvkit types against: tensors, dtypes, the
 * typed op signatures, the public `Backend` and the `ContractError` it throws.
 * Backend authors import `@kvkit/contracts/backend`; generators and docs
 * `@kvkit/contracts/dsl`.
 */
export type { CreateKvMaterializerFn, DequantizeKvFn, FusedNormRopeStackedFn, MlaPoolFusedFn, RopePoolFusedFn } from './generated/backend.js';
export type * from './generated/signatures.js';
export { ContractError, isContractError } from './errors/contractError.js';
export { docsUrl, explainCommand, getDocsBase, setDocsBase } from './errors/docsUrl.js';
export type { Backend, PrepareArgs, PreparableOp, QkvHeads, QkvViews, ViewOptions } from './runtime/backend.js';
export { ropeCosSinCache } from './ropeCosSinCache.js';
export { modelDims } from './modelDims.js';
export type { RopeCosSinCacheArgs } from './ropeCosSinCache.js';
export type { RopeAngleMode } from './backend/rope.js';
export { DTYPES, FLOAT_DTYPES, FP8_DTYPES, INDEX_DTYPES, isFp8, numel } from './tensor.js';
export type { BackendKind, BitsData, BitsOf, DType, FloatDType, Fp8DType, IndexDType, PoolDType, ReadResult, Shape, Tensor, TensorData } from './tensor.js';
export type { Check, ContractViolation, NotThenable } from './types/check.js';

// Before 0.2 this entry also served backend authors and generators. Those names now live in
// `@kvkit/contracts/backend` and `@kvkit/contracts/dsl`; they stay re-exported here so code
// written against 0.1 keeps building. New code imports them from their own entry.
export type {
  BackendKernels,
  CreateKvMaterializerChecked,
  DeviceCheck,
  FusedNormRopeStackedChecked,
  Inherited,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  MaterializerKernels,
  OwnedTensor,
  RopePoolFusedChecked,
  ValidationContext,
} from './backend/index.js';
export { defineBackend, deliverLayerViews, isTensor, LAYER_VIEW, TENSOR_OWNER } from './backend/index.js';
export type { Arg, ContractFile, DimExpr, DTypeRule, ErrorDecl, OpDecl, OutputDecl, Rule, Step, TensorArg } from './dsl/index.js';
export { allErrors, allOps } from './dsl/index.js';
