/**
 * The check of a call's device-side value rules (SEMANTICS.md, "Values that
 * live on the device"), run before any kernel of the call writes: a value
 * that breaks its rule is recorded, and the call is marked rejected, so its
 * writing kernels write nothing at all.
 */
import { cudaKernel, f64, i64, input, output, read, readWrite, u32, wgslKernel } from './declare.js';
import type { CudaParam } from './declare.js';

/** Rules one check launch takes: a call has at most positions, slots, eps and the two fp8 scales. */
export const RULES_PER_CHECK = 5;

const RULES = Array.from({ length: RULES_PER_CHECK }, (_, r) => r);

/** How a rule's values are stored: the codes of CheckValuesParams.kind*. */
export const VALUE_KIND = { i32: 0, i64: 1, f32: 2 } as const;

function ruleParams(r: number): Record<string, CudaParam> {
  return {
    [`values${r}`]: input('void', `rule ${r}'s values, contiguous, or null: no rule ${r}`),
    [`count${r}`]: i64(`values of rule ${r}`),
    [`kind${r}`]: i64('0: i32, 1: i64, 2: f32 (VALUE_KIND)'),
    [`min${r}`]: f64('inclusive lower bound (-inf: none)'),
    [`above${r}`]: f64('exclusive lower bound (-inf: none)'),
    [`below${r}`]: f64('exclusive upper bound (inf: none)'),
    [`negativeSkips${r}`]: i64('1: a negative value breaks nothing (a slot that is not written)'),
    [`finite${r}`]: i64('1: NaN and infinities break the rule'),
    [`check${r}`]: i64('check number, for BadValueRecord.key'),
  };
}

/**
 * The rules' fields of CheckValuesParams, carried by the kernels of ops whose small calls test their own rules
 * (every block over all the values: value_rules.cuh blockFindsBadValue) instead of launching check_values first;
 * all null where check_values ran.
 */
export const valueRuleParams: Readonly<Record<string, CudaParam>> = Object.assign({}, ...RULES.map(ruleParams));

export const checkValuesCuda = cudaKernel({
  kernel: 'checkValues',
  struct: 'CheckValuesParams',
  doc: "One call's value rules, checked before its writing kernels run (check_values.cu).",
  params: {
    ...valueRuleParams,
    badValue: output('BadValueRecord', 'where a bad value is recorded, and the call marked rejected'),
    call: i64("this call's number, stored in BadValueRecord.rejectedCall when a rule breaks"),
  },
  launches: { default: { threads: 256, constants: { rules: RULES_PER_CHECK }, doc: 'grid-stride over the longest rule' } },
  entries: [{ name: 'check_values', launch: 'default' }],
});

function ruleUniforms(r: number) {
  return {
    [`count${r}`]: u32(`values of rule ${r}`),
    [`offset${r}`]: u32(`words of values${r}'s binding before its value 0 (bindings start at the storage offset alignment)`),
    [`flag${r}`]: u32(`flag word of rule ${r}`),
    [`below${r}`]: u32(`rule ${r}, an index rule: its exclusive upper bound (a negative index breaks it unless negativeSkips)`),
    [`negativeSkips${r}`]: u32(`rule ${r}: 1 where a negative index breaks nothing`),
  };
}

/** The uniform of every WGSL kernel that writes for a call with value rules: the word its gate reads first. */
export const callFlag = u32("flag word of the call: raised by its value check when a rule breaks, and then the kernel writes nothing");

export const checkValuesWgsl = wgslKernel({
  kernel: 'checkValues',
  doc: "The rules of one call, checked in one dispatch before the call's writing kernels run (valueChecks.wgsl.ts): a value that breaks its rule raises the rule's flag word and the call's, which the writing kernels read first.",
  uniforms: Object.assign({ longest: u32('values of the rule with the most'), callFlag }, ...RULES.map(ruleUniforms)),
  // Rule 0 is always there; the others where the call has them.
  variants: Object.fromEntries(RULES.slice(1).map((r) => [`rule${r}`, `the call has a rule ${r}`])),
  bindings: {
    ...Object.fromEntries(RULES.map((r) => [`values${r}`, read('u32', `rule ${r}: i32 or f32 words, or i64 as two words`, r === 0 ? undefined : `rule${r}`)])),
    flags: readWrite('atomic<u32>', 'device-check flag words'),
  },
});
