/**
 * One value rule of a call (SEMANTICS.md, "Values that live on the device"),
 * tested in a dispatch of its own before the call's writing kernels: each
 * value that breaks it raises the rule's flag word to 0xffffffff − i with
 * atomicMax (so the word names the first bad index), and the call's kernels,
 * which read their flag words first, write nothing once one is raised.
 *
 * Index rules (positions, slots): a value in [0, below) passes, a negative
 * one too where negatives skip. Float rules (eps): finite and >= 0, -0
 * included, tested on the bits.
 */
import { CHECK_VALUES } from '../generated/params.js';
import type { CheckValuesParams, CheckValuesRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, INDEX_RANGE_WGSL, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { CheckValuesPlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export function checkValuesShader(plan: CheckValuesPlan): KernelSource<CheckValuesParams, CheckValuesRanges> {
  const bindings = CHECK_VALUES.bindings();
  const test =
    plan.valueType === 'f32'
      ? `let bits = values[params.offset + i];
  let bad = bits >= 0x7f800000u && bits != 0x80000000u;`
      : `let v = ${plan.valueType === 'i64' ? 'vec2<u32>(values[params.offset + 2u * i], values[params.offset + 2u * i + 1u])' : 'vec2<u32>(values[params.offset + i], select(0u, 0xffffffffu, (values[params.offset + i] & 0x80000000u) != 0u))'};
  let bad = select(!indexBelow(v, params.below), params.negativeSkips == 0u, indexIsNegative(v));`;
  const code = `${INDEX_RANGE_WGSL}
${CHECK_VALUES.uniformsWgsl}
${bindings.wgsl}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let i = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (i >= params.count) { return; }
  ${test}
  if (bad) { atomicMax(&flags[params.flag], 0xffffffffu - i); }
}
`;
  return kernelSource(CHECK_VALUES, bindings, code);
}
