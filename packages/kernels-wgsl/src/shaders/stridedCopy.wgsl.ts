/**
 * The strided copy behind views (runtime/views.ts): one invocation per
 * destination word, which it writes whole. A word of 16-bit or 8-bit
 * elements may hold elements outside the copy (an offset or a count off the
 * word): those keep their bits, and no other invocation writes the word.
 */
import { STRIDED_COPY } from '../generated/params.js';
import type { StridedCopyParams, StridedCopyRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { StridedCopyPlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/** Dims one dispatch walks: as many as the declaration gives size fields. */
export const STRIDED_COPY_DIMS = STRIDED_COPY.uniformFields.filter((f) => f.startsWith('size')).length;

export function stridedCopyShader(plan: StridedCopyPlan): KernelSource<StridedCopyParams, StridedCopyRanges> {
  const bindings = STRIDED_COPY.bindings();
  // The last dim moves fastest; unused dims have size 1 and add nothing.
  const walk = Array.from({ length: STRIDED_COPY_DIMS }, (_, i) => STRIDED_COPY_DIMS - 1 - i)
    .map((d) => `at += (rest % params.size${d}) * params.stride${d};\n  rest /= params.size${d};`)
    .join('\n  ');
  const bits = 32 / plan.lanes;
  const mask = `0x${(2 ** bits - 1).toString(16)}u`;
  const body =
    plan.lanes > 1
      ? `var word = dst[w];
  for (var h = 0u; h < ${plan.lanes}u; h++) {
    let p = ${plan.lanes}u * w + h;
    if (p >= params.dstOffset && p - params.dstOffset < params.count) {
      let s = sourceElement(p - params.dstOffset);
      let bits = (src[s / ${plan.lanes}u] >> ((s % ${plan.lanes}u) * ${bits}u)) & ${mask};
      word = (word & ~(${mask} << (h * ${bits}u))) | (bits << (h * ${bits}u));
    }
  }
  dst[w] = word;`
      : 'dst[w] = src[sourceElement(w - params.dstOffset)];';
  const code = `${STRIDED_COPY.uniformsWgsl}
${bindings.wgsl}

fn sourceElement(i: u32) -> u32 {
  var rest = i;
  var at = params.srcOffset;
  ${walk}
  return at;
}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (id >= params.words) { return; }
  let w = params.firstWord + id;
  ${body}
}
`;
  return kernelSource(STRIDED_COPY, bindings, code);
}
