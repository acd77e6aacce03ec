import type { ContractFile, ErrorDecl, OpDecl } from '../dsl/declare.js';
import { commonErrors, deviceErrors, tensorErrors } from './common.js';
import { fusedNormRopeStacked } from './fusedNormRopeStacked.js';
import { kvMaterializer } from './kvMaterializer.js';
import { ropePoolFused } from './ropePoolFused.js';

/** Every contract file, in catalog order. Its path is where the generator looks up declaration lines. */
export const contractFiles: readonly { file: string; contract: ContractFile }[] = [
  { file: 'src/ops/common.ts', contract: { errors: { ...commonErrors, ...tensorErrors, ...deviceErrors }, ops: [] } },
  { file: 'src/ops/fusedNormRopeStacked.ts', contract: fusedNormRopeStacked },
  { file: 'src/ops/kvMaterializer.ts', contract: kvMaterializer },
  { file: 'src/ops/ropePoolFused.ts', contract: ropePoolFused },
];

export const allOps: readonly OpDecl[] = contractFiles.flatMap((f) => f.contract.ops);

export const allErrors: Readonly<Record<string, ErrorDecl>> = Object.assign({}, ...contractFiles.map((f) => f.contract.errors));
