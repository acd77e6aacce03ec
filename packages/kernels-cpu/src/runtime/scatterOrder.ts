import type { DuplicateRule } from '@kvkit/contracts/backend';
import type { Storage } from './cpuTensor.js';

/** Index values naming pool slots (negative: skip), and the contract's rule for tokens that share one. */
export interface SlotScatter {
  readonly values: Storage;
  readonly duplicates: DuplicateRule;
}

/**
 * The order a sequential scatter visits tokens in, chosen so that of the
 * tokens naming one slot, the one the rule names writes last and so whole.
 */
export function* scatterOrder(tokens: number, rule: DuplicateRule): Generator<number> {
  switch (rule) {
    case 'last':
      for (let t = 0; t < tokens; t++) yield t;
      return;
  }
}
