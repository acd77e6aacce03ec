export type { Arg, ContractFile, DimExpr, DTypeRule, ErrorDecl, OpDecl, OutputDecl, Rule, Step, TensorArg } from './dsl/declare.js';
export type {
  CreateKvMaterializerFn,
  FusedNormRopeStackedFn,
  KvMaterializer,
  RopePoolFusedFn,
} from './generated/signatures.js';
export type {
  CreateKvMaterializerChecked,
  FusedNormRopeStackedChecked,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  RopePoolFusedChecked,
} from './generated/validators.js';
export { allErrors, allOps } from './ops/index.js';
export { defineBackend } from './runtime/backend.js';
export type { Backend, BackendKernels, MaterializerKernels } from './runtime/backend.js';
export type { DeviceCheck, Inherited, ValidationContext } from './runtime/call.js';
export { deliverLayerViews } from './runtime/layerViews.js';
export { DTYPES, FLOAT_DTYPES, INDEX_DTYPES, isTensor, LAYER_VIEW, numel, TENSOR_OWNER } from './tensor.js';
export type { BackendKind, DType, FloatDType, IndexDType, OwnedTensor, ReadResult, Shape, Tensor, TensorData } from './tensor.js';
export type { Check, ContractViolation } from './types/check.js';
