/**
 * `@kvkit/contracts/backend`: what a backend author needs beyond the user API.
 * The backend layer: validated call arguments, the wrapper that validates
 * every call, and the rules of SEMANTICS.md that are not kernel code.
 */
export type {
  CreateKvMaterializerChecked,
  FusedNormRopeStackedChecked,
  KvMaterializerMaterializeChecked,
  KvMaterializerMaterializeIntoChecked,
  RopePoolFusedChecked,
} from '../generated/validators.js';
export { defineBackend } from '../runtime/backend.js';
export type { BackendKernels, MaterializerKernels } from '../runtime/backend.js';
export type { DeviceCheck, Inherited, ValidationContext } from '../runtime/call.js';
export { deliverLayerViews } from '../runtime/layerViews.js';
export { isTensor, LAYER_VIEW, numel, TENSOR_OWNER } from '../tensor.js';
export type { OwnedTensor } from '../tensor.js';
export * from './halfFloats.js';
export * from './hostData.js';
