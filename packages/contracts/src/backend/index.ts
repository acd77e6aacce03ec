/**
 * `@kvkit/contracts/backend`: what a backend author needs beyond the user API.
 * The backend layer: validated call arguments, the wrapper that validates
 * every call, and the rules of SEMANTICS.md that are not kernel code.
 */
export type {
  CopySlotsChecked,
  CreateKvMaterializerChecked,
  DequantizeKvChecked,
  PagedAttentionChecked,
  FusedNormRopeStackedChecked,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  MlaPoolFusedChecked,
  RopePoolFusedChecked,
} from '../generated/validators.js';
export { writtenInPlace } from '../generated/validators.js';
export { defineBackend } from '../runtime/backend.js';
export type { KvMaterializerKernels, OpKernels } from '../generated/backend.js';
export type { BackendKernels, MaterializerKernels, PreparableOp, PreparedCall } from '../runtime/backend.js';
export type { DuplicateRule } from '../dsl/declare.js';
export { describeBackend, describeValue } from '../runtime/call.js';
export type { DeviceCheck, DeviceSegmentCheck, Inherited, ValidationContext } from '../runtime/call.js';
export { deliverLayerViews } from '../runtime/layerViews.js';
export { validateTensorCreation, validateTensorRead, validateTensorUse } from '../runtime/tensors.js';
export { validateWrapLayout } from '../runtime/views.js';
export { contiguousStrides, isContiguous, layoutOf, mergedDims, storageBytes, storageOffsets, storageOverlaps, viewExtent } from './viewLayout.js';
export type { ViewLayout, WalkDims } from './viewLayout.js';
export type { TensorLimit } from '../runtime/tensors.js';
export { isTensor, LAYER_VIEW, numel, TENSOR_LAYOUT, TENSOR_OWNER } from '../tensor.js';
export type { OwnedTensor, StorageLayout } from '../tensor.js';
export { MAX_POSITION_BELOW } from '../ops/kvMaterializer.js';
export { OpCall, OpLifecycle } from './opLifecycle.js';
export {
  ANGLE_TABLE_HEADER_WORDS,
  dynamicBase,
  exactTurns,
  FLOAT32_REDUCTION_EXPONENTS,
  float32Angle,
  float32Frequencies,
  longropeFactors,
  longropeMagnitude,
  ropeAngles,
  ropeAnglesKey,
  ropeAngleTable,
  ropeFrequencies,
  turnsAt,
  writeCosSinRow,
  writeCosSinRows,
  yarnMagnitude,
} from './rope.js';
export type { RopeAngleMode, RopeAngles, RopeScaling, RopeSpec, WritableNumbers } from './rope.js';
export { mropeBounds, mropeLayout, mropeStreamOfPair, writeMropeCosSinRow, writeMropeRow } from './mrope.js';
export type { MropeLayout, MropeStreams } from './mrope.js';
export { breaksValueRule, valueBounds, valueRuleError } from './valueRules.js';
export { firstLongerSegment, firstOffsetsBreak, offsetsRuleError, segmentsWithinError } from './segmentRules.js';
export type { OffsetsBounds, OffsetsBreak, SegmentBounds, SegmentsWithinBounds } from './segmentRules.js';
export type { ValueBounds } from './valueRules.js';
export { attentionScale } from './attention.js';
export { DroppedTensors } from './droppedTensors.js';
export { grownCapacity, Workspace } from './workspace.js';
export type { WorkspaceMemory } from './workspace.js';
export * from './fp8.js';
export * from './kvPoolLayout.js';
export * from './halfFloats.js';
export * from './hostData.js';
export * from './hostReads.js';
