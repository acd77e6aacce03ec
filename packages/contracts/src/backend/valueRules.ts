/**
 * Value rules on index tensors and float parameter tensors (SEMANTICS.md,
 * "Value checks"): the bounds a
 * call resolves, whether a value breaks them, and the ContractError for the
 * first token that does. The host check and every device's decoding of its
 * recorded bad value go through `valueRuleError`, so the three cannot drift.
 */
import { ContractError } from '../errors/contractError.js';

/** A value rule with its bounds resolved for one call. */
export interface ValueBounds {
  readonly arg: string;
  /** Inclusive lower bound; undefined where negatives skip (or no bound is declared). */
  readonly min: number | undefined;
  /** Exclusive lower bound (a scale: > 0); undefined where none is declared. */
  readonly above: number | undefined;
  /** Exclusive upper bound a kernel enforces: the rule's dim, capped by its ceiling; undefined for none. */
  readonly below: number | undefined;
  /** The bound the rule's own dim gives (undefined while the dim is unbound): its message shows this one. */
  readonly declaredBelow: number | undefined;
  readonly negativeSkips: boolean;
  /** NaN and ±Inf break the rule (a float parameter such as eps). */
  readonly finite: boolean;
  readonly code: string;
  /** A bound kept whatever the dim says, reported with its own code. */
  readonly ceiling: { readonly below: number; readonly code: string } | undefined;
  readonly op: string;
}

/** Resolves a declared rule against the dims of a call. */
export function valueBounds(
  op: string,
  arg: string,
  rule: { readonly min?: number; readonly above?: number; readonly finite?: boolean; readonly negativeSkips?: boolean; readonly ceiling?: { readonly below: number; readonly code: string } },
  declaredBelow: number | undefined,
  code: string,
): ValueBounds {
  const ceiling = rule.ceiling;
  const capped = ceiling === undefined ? declaredBelow : Math.min(declaredBelow ?? Infinity, ceiling.below);
  return {
    arg,
    min: rule.negativeSkips ? undefined : rule.min,
    above: rule.above,
    below: capped,
    declaredBelow,
    negativeSkips: rule.negativeSkips ?? false,
    finite: rule.finite ?? false,
    code,
    ceiling,
    op,
  };
}

/** Whether `value` breaks the rule; a negative value of a rule where negatives skip never does. */
export function breaksValueRule(rule: ValueBounds, value: number | bigint): boolean {
  const v = Number(value);
  if (rule.finite && !Number.isFinite(v)) return true;
  if (rule.negativeSkips && v < 0) return false;
  return (rule.min !== undefined && v < rule.min) || (rule.above !== undefined && !(v > rule.above)) || (rule.below !== undefined && v >= rule.below);
}

/**
 * The error for token `index`, whose value `actual` broke the rule: the same
 * code, details and message wherever the value was found. `actual` keeps the
 * tensor's own type (a bigint for i64, a number for i32).
 */
export function valueRuleError(rule: ValueBounds, index: number, actual: number | bigint, dims: Readonly<Record<string, number>>): ContractError {
  const v = Number(actual);
  if (rule.finite) return new ContractError(rule.code, rule.op, { arg: rule.arg, index, actual: v, expected: floatRuleText(rule) }, { ...dims });
  const { ceiling } = rule;
  const breaksOwnBound = (rule.min !== undefined && v < rule.min) || (rule.declaredBelow !== undefined && v >= rule.declaredBelow);
  if (ceiling !== undefined && v >= ceiling.below && !breaksOwnBound) {
    return new ContractError(ceiling.code, rule.op, { arg: rule.arg, index, actual, expected: ceiling.below }, { ...dims });
  }
  return new ContractError(rule.code, rule.op, { arg: rule.arg, index, actual, expected: rule.declaredBelow ?? '∞' }, { ...dims });
}

/** `finite and >= 0` (eps), `finite and > 0` (a scale): what every value of a float rule must be, for its message. */
function floatRuleText(rule: ValueBounds): string {
  const bounds = [rule.min !== undefined ? `>= ${rule.min}` : undefined, rule.above !== undefined ? `> ${rule.above}` : undefined, rule.below !== undefined ? `< ${rule.below}` : undefined].filter(Boolean);
  return ['finite', ...bounds].join(' and ');
}
