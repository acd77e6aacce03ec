import { statefulOps } from '../dsl/declare.js';
import type { CallDecl, ContractFile, ErrorDecl, OpDecl, StatefulDecl } from '../dsl/declare.js';
import { commonErrors, deviceErrors, tensorCalls, tensorErrors, viewErrors } from './common.js';
import { fusedNormRopeStacked } from './fusedNormRopeStacked.js';
import { kvMaterializer } from './kvMaterializer.js';
import { kvPools } from './kvPools.js';
import { mlaPoolFused } from './mlaPoolFused.js';
import { copySlots } from './copySlots.js';
import { pagedAttention } from './pagedAttention.js';
import { ropePoolFused } from './ropePoolFused.js';
import { ropeScaling } from './ropeScaling.js';

/** Every contract file, in catalog order. Its path is where the generator looks up declaration lines. */
export const contractFiles: readonly { file: string; contract: ContractFile }[] = [
  { file: 'src/ops/common.ts', contract: { errors: { ...commonErrors, ...tensorErrors, ...viewErrors, ...deviceErrors }, ops: [], calls: tensorCalls } },
  { file: 'src/ops/fusedNormRopeStacked.ts', contract: fusedNormRopeStacked },
  { file: 'src/ops/kvMaterializer.ts', contract: kvMaterializer },
  { file: 'src/ops/ropePoolFused.ts', contract: ropePoolFused },
  { file: 'src/ops/ropeScaling.ts', contract: ropeScaling },
  { file: 'src/ops/kvPools.ts', contract: kvPools },
  { file: 'src/ops/pagedAttention.ts', contract: pagedAttention },
  { file: 'src/ops/copySlots.ts', contract: copySlots },
  { file: 'src/ops/mlaPoolFused.ts', contract: mlaPoolFused },
];

/** Ops in declaration order; a stateful op gives its constructor and then its methods (`KvMaterializer.materialize`). */
export const opsOf = (c: ContractFile): OpDecl[] => [...c.ops, ...(c.stateful ?? []).flatMap(statefulOps)];

/** Every op the backends expose, in declaration order: what the generator, the catalog and the docs are built from. */
export const allOps: readonly OpDecl[] = contractFiles.flatMap((f) => opsOf(f.contract));

export const allStateful: readonly StatefulDecl[] = contractFiles.flatMap((f) => f.contract.stateful ?? []);

/** Backend calls that are not ops (`tensor`, `empty`, `read`) and the codes they raise. */
export const allCalls: readonly CallDecl[] = contractFiles.flatMap((f) => f.contract.calls ?? []);

/** Every error code declared by any contract, by code. */
export const allErrors: Readonly<Record<string, ErrorDecl>> = Object.assign({}, ...contractFiles.map((f) => f.contract.errors));
