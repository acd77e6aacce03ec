/**
 * Rules on offsets tensors (an indptr `[B + 1]` splitting rows into B
 * requests): where the first one breaks, and the ContractError for it. The
 * host check and every device's decoding of its recorded verdict go through
 * `segmentRuleError`, so the messages cannot drift.
 */
import { ContractError } from '../errors/contractError.js';

/** An offsets rule resolved for one call: `[0, ..., total]`, never decreasing. */
export interface OffsetsBounds {
  readonly kind: 'offsets';
  readonly arg: string;
  /** The dim expression the last offset must equal (`N`), for the message. */
  readonly totalName: string;
  /** Its value in this call. */
  readonly total: number;
  readonly code: string;
  readonly op: string;
}

/** Segment b of `arg` is no longer than segment b of `within` (two offsets tensors of one length). */
export interface SegmentsWithinBounds {
  readonly kind: 'segmentsWithin';
  readonly arg: string;
  readonly within: string;
  readonly code: string;
  readonly op: string;
}

export type SegmentBounds = OffsetsBounds | SegmentsWithinBounds;

/**
 * How an offsets tensor breaks its rule at entry `index`: `start` (entry 0
 * is not 0), `decreasing` (below the entry before it) or `end` (the last is
 * not the total). A device records the entry and which of the three.
 */
export type OffsetsBreak = 'start' | 'decreasing' | 'end';

/** The first entry of `values` that breaks the offsets rule, or undefined: entries in order, the end checked last. */
export function firstOffsetsBreak(values: ArrayLike<number | bigint>, total: number): { index: number; how: OffsetsBreak } | undefined {
  const n = values.length;
  if (n === 0) return undefined;
  if (Number(values[0]!) !== 0) return { index: 0, how: 'start' };
  for (let i = 1; i < n; i++) if (Number(values[i]!) < Number(values[i - 1]!)) return { index: i, how: 'decreasing' };
  if (Number(values[n - 1]!) !== total) return { index: n - 1, how: 'end' };
  return undefined;
}

/** The first segment b whose length in `values` exceeds its length in `within` (both already valid offsets), or undefined. */
export function firstLongerSegment(values: ArrayLike<number | bigint>, within: ArrayLike<number | bigint>): { index: number; length: number; limit: number } | undefined {
  for (let b = 0; b + 1 < values.length; b++) {
    const length = Number(values[b + 1]!) - Number(values[b]!);
    const limit = Number(within[b + 1]!) - Number(within[b]!);
    if (length > limit) return { index: b, length, limit };
  }
  return undefined;
}

/** The error of an offsets rule broken at `index` (value `actual`), the same wherever it was found. */
export function offsetsRuleError(rule: OffsetsBounds, index: number, actual: number | bigint, how: OffsetsBreak, dims: Readonly<Record<string, number>>): ContractError {
  const problem =
    how === 'start'
      ? 'offsets start at 0'
      : how === 'decreasing'
        ? `it is below ${rule.arg}[${index - 1}]; offsets never decrease`
        : `the last offset must be ${rule.totalName} = ${rule.total}`;
  return new ContractError(rule.code, rule.op, { arg: rule.arg, index, actual, problem }, { ...dims });
}

/** The error of request `index`, whose segment of `rule.arg` has `length` rows where `rule.within` gives it `limit`. */
export function segmentsWithinError(rule: SegmentsWithinBounds, index: number, length: number, limit: number, dims: Readonly<Record<string, number>>): ContractError {
  return new ContractError(rule.code, rule.op, { arg: rule.arg, other: rule.within, index, actual: length, expected: limit }, { ...dims });
}
