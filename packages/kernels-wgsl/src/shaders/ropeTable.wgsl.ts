/**
 * cos/sin rows for RoPE from a base (no cache): row t holds cos(p·f_j) for
 * j < R/2, then sin(p·f_j), p = positions[t]. The angle is kept in turns,
 * u = p · f_j / 2π (f_j / 2π precomputed in f64 and rounded once), so the
 * reduction to one turn, u − round(u), is exact in f32; sin and cos then run
 * on [−π/4, π/4] with fixed polynomials, accurate whatever the device's own
 * sin/cos do with large arguments. The error left is the rounding of u:
 * about 2^-23 · p radians, inside the tolerance SEMANTICS.md allows for ropeBase.
 * With mRoPE's [3, T] positions, pair j reads the position of its stream.
 */
import { ROPE_TABLE } from '../generated/params.js';
import type { RopeTableParams, RopeTableRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { RopeTablePlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export const SIN_COS_TURNS_WGSL = /* wgsl */ `
// (sin, cos) of 2π·u.
fn sinCosTurns(u: f32) -> vec2<f32> {
  let w = u - round(u);
  let quadrant = round(w * 4.0);
  let x = (w - quadrant * 0.25) * 6.283185307179586;
  let x2 = x * x;
  let s = x + x * x2 * (-1.6666654611e-1 + x2 * (8.3321608736e-3 + x2 * -1.9515295891e-4));
  let c = 1.0 - 0.5 * x2 + x2 * x2 * (4.166664568298827e-2 + x2 * (-1.388731625493765e-3 + x2 * 2.443315711809948e-5));
  switch (i32(quadrant) & 3) {
    case 1: { return vec2<f32>(c, -s); }
    case 2: { return vec2<f32>(-s, -c); }
    case 3: { return vec2<f32>(-c, s); }
    default: { return vec2<f32>(s, c); }
  }
}
`;

export function ropeTableShader(plan: RopeTablePlan): KernelSource<RopeTableParams, RopeTableRanges> {
  const bindings = ROPE_TABLE.bindings();
  const code = `${ROPE_TABLE.uniformsWgsl}
${bindings.wgsl}
${indexReader('positionAt', 'positions', plan.positionType)}
${SIN_COS_TURNS_WGSL}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  let t = id / params.halfRotary;
  if (t >= params.tokens) { return; }
  let j = id % params.halfRotary;
  // mRoPE: pair j's stream (0 temporal, 1 height, 2 width); streamStride 0 leaves one stream.
  let stream = select(select(2u, 1u, j < params.heightPairsEnd), 0u, j < params.temporalPairs);
  let v = positionAt(stream * params.streamStride + t);
  // The position as f32 (exact below 2^24); an i64 past the i32 range still gets its nearest value.
  let fitsI32 = v.y == select(0u, 0xffffffffu, (v.x & 0x80000000u) != 0u);
  let p = select(f32(bitcast<i32>(v.y)) * 4294967296.0 + f32(v.x), f32(bitcast<i32>(v.x)), fitsI32);
  let sc = sinCosTurns(p * turnsPerPosition[j]);
  let rowBase = t * 2u * params.halfRotary;
  table[rowBase + j] = sc.y;
  table[rowBase + params.halfRotary + j] = sc.x;
}
`;
  return kernelSource(ROPE_TABLE, bindings, code);
}
