/** `@kvkit/contracts/dsl`: the contract language and the declared ops, for generators and docs. */
export type { Arg, CallDecl, ContractFile, DimExpr, DTypeRule, DuplicateRule, ErrorDecl, MethodDecl, OpDecl, OutputDecl, Rule, StatefulDecl, Step, StreamsRule, TensorArg } from './declare.js';
export { callback, choice, distinct, errors, exactlyOne, F32, FLOAT, INDEX, int, ints, number, requires, sameAs, stateful, statefulOps, tensor, values } from './declare.js';
export { allCalls, allErrors, allOps, allStateful } from '../ops/index.js';
export { canonicalCode } from '../errors/codes.js';
export { formatValue, render } from '../errors/render.js';
