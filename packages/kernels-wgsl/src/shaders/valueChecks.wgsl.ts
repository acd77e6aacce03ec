/**
 * The value rules of one call (SEMANTICS.md, "Values that live on the
 * device"), tested in one dispatch before the call's writing kernels: each
 * value that breaks its rule raises the rule's flag word to 0xffffffff − i
 * with atomicMax (so the word ends up naming the first bad index) and the
 * call's flag word, which the call's kernels read first: then they write
 * nothing.
 *
 * Index rules (positions, slots): a value in [0, below) passes, a negative
 * one too where negatives skip. Float rules, tested on the bits: eps finite
 * and >= 0 (-0 included), an fp8 scale finite and > 0.
 */
import { RULES_PER_CHECK } from '@kvkit/contracts/kernels';
import { CHECK_VALUES } from '../generated/params.js';
import type { CheckValuesBindingOptions, CheckValuesParams, CheckValuesRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, INDEX_RANGE_WGSL, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { CheckValuesPlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/** Rule r's test of value i: raises its flag word where the value breaks it. */
function ruleCheck(r: number, valueType: CheckValuesPlan['valueTypes'][number]): string {
  const at = (k: string) => `values${r}[params.offset${r} + ${k}]`;
  const test =
    valueType === 'f32 >= 0'
      ? `let bits${r} = ${at('i')};
    let bad${r} = bits${r} >= 0x7f800000u && bits${r} != 0x80000000u;`
      : valueType === 'f32 > 0'
        ? `let bits${r} = ${at('i')};
    let bad${r} = bits${r} == 0u || bits${r} >= 0x7f800000u;`
        : `let v${r} = ${valueType === 'i64' ? `vec2<u32>(${at('2u * i')}, ${at('2u * i + 1u')})` : `vec2<u32>(${at('i')}, select(0u, 0xffffffffu, (${at('i')} & 0x80000000u) != 0u))`};
    let bad${r} = select(!indexBelow(v${r}, params.below${r}), params.negativeSkips${r} == 0u, indexIsNegative(v${r}));`;
  return `if (i < params.count${r}) {
    ${test}
    if (bad${r}) {
      atomicMax(&flags[params.flag${r}], 0xffffffffu - i);
      atomicMax(&flags[params.callFlag], 1u);
    }
  }`;
}

export function checkValuesShader(plan: CheckValuesPlan): KernelSource<CheckValuesParams, CheckValuesRanges> {
  const rules = plan.valueTypes;
  // Rule 0's binding is always there; rule r's where the call has r + 1 rules or more.
  const present = Object.fromEntries(Array.from({ length: RULES_PER_CHECK - 1 }, (_, i) => [`rule${i + 1}`, i + 1 < rules.length]));
  const bindings = CHECK_VALUES.bindings(present as unknown as CheckValuesBindingOptions);
  const code = `${INDEX_RANGE_WGSL}
${CHECK_VALUES.uniformsWgsl}
${bindings.wgsl}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let i = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (i >= params.longest) { return; }
  ${rules.map((t, r) => ruleCheck(r, t)).join('\n  ')}
}
`;
  return kernelSource(CHECK_VALUES, bindings, code);
}
