import type { ModelDims, ModelDimsChecks } from './generated/signatures.js';

/**
 * A model's dims as one object to spread into several calls, each kept as
 * the literal it was written as, so the shape checks of every call that
 * spreads it stay on: `{ numKvHeads: 8 }` alone widens to `number`, which
 * passes every compile-time check and leaves them to run time. Other fields
 * (ropeBase, ropeScaling, …) are kept literal too. Literal dims are checked
 * here as the ops check them (KV006, KV007, KV037). Returns its argument.
 */
export function modelDims<const T extends ModelDims>(dims: T & ModelDimsChecks<T>): T {
  return dims;
}
