/**
 * `@kvkit/contracts/kernels`: every kernel's interface, declared once, for the
 * backends' generators (CUDA parameter structs and entry points, WGSL
 * uniform blocks and bindings, and the typed host writers of both).
 */
import { deviceRecords } from './deviceRecords.js';
import { fusedNormRopeCuda, normRopeWgsl } from './fusedNormRopeStacked.js';
import { gatherStridedCuda } from './gatherStrided.js';
import { halvesCuda } from './hostTransfer.js';
import { copyCuda, copyWgsl, fillCuda, fmaWgsl, spinCuda } from './measurement.js';
import { gemmCuda, gemmReduceWgsl, gemmWgsl } from './projection.js';
import { poolReadCuda, poolReadWgsl, poolStoreWgsl } from './kvPools.js';
import { ropeNormRowsWgsl } from './ropeNormRows.js';
import { claimSlotsCuda, ropePoolCuda, ropeRowsWgsl, ropeTableWgsl, slotOwnersWgsl } from './ropePoolFused.js';
import { STRIDED_COPY_DIMS, stridedCopyWgsl } from './views.js';
import { checkValuesCuda, checkValuesWgsl, RULES_PER_CHECK, VALUE_KIND } from './valueChecks.js';
import { pagedCudaKernels, pagedWgslKernels } from './pagedAttention.js';
import { mlaPoolCuda, mlaRowsWgsl } from './mlaPoolFused.js';

export type { CudaElement, CudaEntry, CudaKernelDecl, CudaLaunch, CudaParam, CudaRecordDecl, RecordField, StorageBindingDecl, UniformField, WgslKernelDecl } from './declare.js';
export { MAX_UNIFORM_WORDS } from './declare.js';
export { GATHER_MAX_RANK } from './gatherStrided.js';
export { FLOAT_CODE } from './floatCode.js';
export { deviceRecords, RULES_PER_CHECK, STRIDED_COPY_DIMS, VALUE_KIND };
export {
  checkSegmentsCuda,
  checkSegmentsWgsl,
  copySlotsCuda,
  copySlotsWgsl,
  pagedAttentionCuda,
  pagedAttentionMergeCuda,
  pagedAttentionMergeWgsl,
  pagedAttentionWgsl,
  pagedCudaKernels,
  pagedWgslKernels,
} from './pagedAttention.js';

export const cudaKernels = [checkValuesCuda, fusedNormRopeCuda, ropePoolCuda, claimSlotsCuda, poolReadCuda, gemmCuda, copyCuda, spinCuda, fillCuda, halvesCuda, gatherStridedCuda, mlaPoolCuda, ...pagedCudaKernels];
export const wgslKernels = [checkValuesWgsl, normRopeWgsl, ropeRowsWgsl, ropeTableWgsl, slotOwnersWgsl, poolStoreWgsl, poolReadWgsl, gemmWgsl, gemmReduceWgsl, copyWgsl, fmaWgsl, stridedCopyWgsl, ropeNormRowsWgsl, ...pagedWgslKernels, mlaRowsWgsl];
