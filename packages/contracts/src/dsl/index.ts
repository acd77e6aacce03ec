/** `@kvkit/contracts/dsl`: the contract language and the declared ops, for generators and docs. */
export type { Arg, ContractFile, DimExpr, DTypeRule, DuplicateRule, ErrorDecl, OpDecl, OutputDecl, Rule, Step, TensorArg } from './declare.js';
export { allErrors, allOps } from '../ops/index.js';
export { canonicalCode } from '../errors/codes.js';
export { formatValue, render } from '../errors/render.js';
