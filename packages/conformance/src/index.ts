export { fusedNormRopeStackedCases, kvMaterializerCases, ropePoolFusedCases } from './cases.js';
export type { FusedCase, MaterializerCase, MaterializerRope, RopePoolCase, RopeStyle } from './cases.js';
export {
  buildCosSinCache,
  distinctPositions,
  epsPerLayer,
  patternValues,
  randomPositive,
  randomValues,
  Rng,
  roundToDType,
  seedOf,
  slotPermutation,
} from './data.js';
export { fusedNormRopeStackedOracle, normedK, projectionOracle, ropePoolFusedOracle } from './oracle.js';
export { defineConformanceSuite } from './suite.js';
export { ATTENTION_CASES, ATTENTION_TOLERANCE, COPY_CASES, LSE_TOLERANCE, pagedAttentionOracle, runAttentionCase, runCopyCase, skipUnlessRuns } from './pagedAttention.js';
export type { AttentionCase, AttentionInputs, CopyCase } from './pagedAttention.js';
export { checkMropeQkNormOnViews, mropeQkNormCases, runMropeQkNormCase } from './mropeQkNorm.js';
export { checkMaterializeIntoPools, checkNormedMropeIntoFp8Pool, checkRopePoolIntoPools, NORMED_MROPE_CASES, POOL_CASES } from './fp8Pools.js';
export type { PoolCase } from './fp8Pools.js';
export { mropeMaterializerCases, runMropeMaterializerCase } from './mropeMaterializer.js';
export { defineResourceSuite } from './resources.js';
export type { ResourceOptions } from './resources.js';
export type { ConformanceOptions } from './suite.js';
export { Checks, compare, expectMatch, RELATIVE_TOLERANCE, ropeBaseTolerance } from './tolerances.js';
export type { Comparison, Expectation, Layout } from './tolerances.js';
export { validationCases } from './validation-cases.js';
export type { ValidationCase } from './validation-cases.js';
export { contractErrorProblems, defineValidationSuite } from './validation.js';
export { definePropertySuite } from './properties/suite.js';
export type { PropertyOptions } from './properties/suite.js';
