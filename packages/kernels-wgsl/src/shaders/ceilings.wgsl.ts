/**
 * Ceiling kernels for the benchmark: what this device does at best, measured
 * in the same run as the ops. A vec4<u32> copy (bytes read + written), and a
 * loop of independent f32 FMAs (8 vec4 chains per invocation).
 */
import { COPY, FMA } from '../generated/params.js';
import type { CopyParams, CopyRanges, FmaParams, FmaRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { CopyPlan, FmaPlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/** Each invocation copies `vectorsPerInvocation` vec4<u32>, one per stride of all invocations (coalesced per step). */
export function copyShader(plan: CopyPlan): KernelSource<CopyParams, CopyRanges> {
  const bindings = COPY.bindings();
  const steps = Array.from({ length: plan.vectorsPerInvocation }, (_, j) => j);
  const code = `${COPY.uniformsWgsl}
${bindings.wgsl}
@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let i = linearWorkgroup * ${plan.workgroupSize}u + lane;
  ${steps.map((j) => `let v${j} = src[min(i + ${j}u * params.invocations, params.vectors - 1u)];`).join('\n  ')}
  ${steps.map((j) => `if (i + ${j}u * params.invocations < params.vectors) { dst[i + ${j}u * params.invocations] = v${j}; }`).join('\n  ')}
}
`;
  return kernelSource(COPY, bindings, code);
}

/** FLOPs one invocation of the FMA kernel performs: 8 vec4 FMAs (2 FLOPs per lane) per step. */
export function fmaFlopsPerInvocation(plan: FmaPlan): number {
  return plan.steps * 8 * 4 * 2;
}

export function fmaShader(plan: FmaPlan): KernelSource<FmaParams, FmaRanges> {
  const bindings = FMA.bindings();
  const chains = Array.from({ length: 8 }, (_, i) => i);
  const code = `${FMA.uniformsWgsl}
${bindings.wgsl}
@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let i = linearWorkgroup * ${plan.workgroupSize}u + lane;
  // Operands from the uniform seed, so nothing folds at compile time.
  let m = vec4<f32>(1.0 - f32(params.seed) * 1e-9);
  let c = vec4<f32>(f32(i & 7u) * 1e-7);
  ${chains.map((k) => `var a${k} = vec4<f32>(f32(i) * 1e-6 + ${k}.0);`).join('\n  ')}
  for (var s = 0u; s < ${plan.steps}u; s++) {
    ${chains.map((k) => `a${k} = fma(a${k}, m, c);`).join('\n    ')}
  }
  let total = ${chains.map((k) => `a${k}`).join(' + ')};
  if (i < params.invocations) { out[i] = total.x + total.y + total.z + total.w; }
}
`;
  return kernelSource(FMA, bindings, code);
}
