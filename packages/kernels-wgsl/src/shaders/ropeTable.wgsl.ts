/**
 * cos/sin rows for RoPE from a base (no cache): row t holds cos(a_j) for
 * j < R/2, then sin(a_j), times the magnitude, a_j the angle of pair j at
 * p = positions[t] (backend/rope.ts ropeAngleTable gives the table).
 *
 * 'exact': f_j / 2π is a 96-bit fixed-point fraction; p · it mod 1 is taken
 * with 32-bit integer products (whole turns fall off the top), exact to
 * 2^-64 turns. 'float32': the f32 angle A = fround(fround(p) · f_j), then
 * A = m · 2^e reduced the same way with the fraction of 2^e / 2π. Either
 * way sin and cos then run on a quarter turn or less, from the reduced angle
 * in two f32 parts, so the result is within an ulp or so of cos/sin of the
 * true angle, whatever the device's own sin and cos do with large arguments.
 * With mRoPE's [3, T] positions, pair j takes the position of its stream
 * (contiguous sections, or Qwen3-VL's interleaved layout).
 */
import { ANGLE_TABLE_HEADER_WORDS, FLOAT32_REDUCTION_EXPONENTS } from '@kvkit/contracts/backend';
import { ROPE_TABLE } from '../generated/params.js';
import type { RopeTableParams, RopeTableRanges } from '../generated/params.js';
import { ENTRY_BUILTINS, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { RopeTablePlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/**
 * mRoPE's stream of pair j (0 temporal, 1 height, 2 width) from the uniforms
 * temporalPairs, heightPairsEnd and interleaved: contiguous runs ending there,
 * or (interleaved, Qwen3-VL) height at j % 3 == 1 below the first, width at
 * j % 3 == 2 below the second, temporal elsewhere.
 */
export const MROPE_STREAM_WGSL = /* wgsl */ `
fn mropeStream(j: u32) -> u32 {
  if (params.interleaved != 0u) {
    let r = j % 3u;
    return select(select(0u, 2u, r == 2u && j < params.heightPairsEnd), 1u, r == 1u && j < params.temporalPairs);
  }
  return select(select(2u, 1u, j < params.heightPairsEnd), 0u, j < params.temporalPairs);
}
`;

/** 2π as a 12-bit f32 (so a 12-bit factor times it is exact) plus the f32 rest. */
const TWO_PI_HI = Math.fround(Math.round(2 * Math.PI * 2 ** 9) / 2 ** 9);
const TWO_PI_LO = Math.fround(2 * Math.PI - TWO_PI_HI);
const f32Literal = (x: number) => `${Math.fround(x).toPrecision(9)}`;

/** The angle function: `ropeCosSin(position, j)` gives (cos, sin) of pair j, the magnitude applied, from the table `angleTable`. */
export const ROPE_ANGLE_WGSL = /* wgsl */ `
// (low, high) words of the 64-bit product a · b.
fn mulWide(a: u32, b: u32) -> vec2<u32> {
  let a0 = a & 0xffffu;
  let a1 = a >> 16u;
  let b0 = b & 0xffffu;
  let b1 = b >> 16u;
  let p00 = a0 * b0;
  let p01 = a0 * b1;
  let p10 = a1 * b0;
  let mid = (p00 >> 16u) + (p01 & 0xffffu) + (p10 & 0xffffu);
  return vec2<u32>((p00 & 0xffffu) | (mid << 16u), a1 * b1 + (p01 >> 16u) + (p10 >> 16u) + (mid >> 16u));
}

// n · g mod 1 as a 64-bit fraction (high word first); n = (low, high) words, g a 96-bit fraction (g.x most significant).
fn turnsOf(n: vec2<u32>, g: vec3<u32>) -> vec2<u32> {
  let a = mulWide(n.x, g.z);
  let b = mulWide(n.x, g.y);
  let d = mulWide(n.y, g.z);
  let w1 = a.y + b.x;
  let low = w1 + d.x;
  let carry = select(0u, 1u, w1 < a.y) + select(0u, 1u, low < w1);
  // n.x · g.x and n.y · g.y keep only their low words: the rest is whole turns.
  return vec2<u32>(b.y + d.y + n.x * g.x + n.y * g.y + carry, low);
}

// (cos, sin) of 2π·t, t a 64-bit fraction of a turn.
fn cosSinOfTurns(t: vec2<u32>) -> vec2<f32> {
  // The nearest quarter turn, and the rest r = t - quadrant/4 in [-1/8, 1/8) (signed, 2^-64 units).
  let shifted = t.x + 0x20000000u;
  let quadrant = shifted >> 30u;
  let rHigh = bitcast<i32>(shifted & 0x3fffffffu) - 0x20000000;
  // r in two f32 parts: the high word with its low 8 bits cleared (exact), and the rest.
  let top = f32(rHigh & ~0xff) * 2.3283064365386963e-10;
  let rest = (f32(rHigh & 0xff) + f32(t.y) * 2.3283064365386963e-10) * 2.3283064365386963e-10;
  // x = 2π·r as hi + lo: a 12-bit head of r times a 12-bit 2π is exact.
  let head = bitcast<f32>(bitcast<u32>(top) & 0xfffff000u);
  let exactPart = head * ${f32Literal(TWO_PI_HI)};
  let small = head * ${f32Literal(TWO_PI_LO)} + ((top - head) + rest) * 6.28318548;
  let x = exactPart + small;
  let xTail = small - (x - exactPart);
  let sc = cosSinSmall(x, xTail);
  switch (quadrant) {
    case 1u: { return vec2<f32>(-sc.y, sc.x); }
    case 2u: { return vec2<f32>(-sc.x, -sc.y); }
    case 3u: { return vec2<f32>(sc.y, -sc.x); }
    default: { return sc; }
  }
}

// (cos, sin) of x + tail, |x| <= π/4, |tail| within half an ulp of x.
fn cosSinSmall(x: f32, tail: f32) -> vec2<f32> {
  let z = x * x;
  let s = x + (tail * (1.0 - 0.5 * z) + x * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4)));
  let half = 0.5 * z;
  let w = 1.0 - half;
  let c = w + (((1.0 - w) - half) + (z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5)) - x * tail));
  return vec2<f32>(c, s);
}

// The f32 value nearest the integer n (ties to even), as torch's .float() rounds a position; n >= 0 below 2^32.
fn f32OfCount(n: u32) -> f32 {
  let bits = 32u - countLeadingZeros(n);
  if (bits <= 24u) { return f32(n); }
  let drop = bits - 24u;
  let half = 1u << (drop - 1u);
  let rem = n & ((1u << drop) - 1u);
  var q = n >> drop;
  if (rem > half || (rem == half && (q & 1u) == 1u)) { q = q + 1u; }
  return ldexp(f32(q), i32(drop));
}

// (cos, sin) of pair j at the position given as (low, high) words of an i64, times the magnitude.
fn ropeCosSin(position: vec2<u32>, j: u32) -> vec2<f32> {
  let negative = (position.y & 0x80000000u) != 0u;
  let lowNegated = ~position.x + 1u;
  let n = select(position, vec2<u32>(lowNegated, ~position.y + select(0u, 1u, lowNegated == 0u)), negative);
  let at = ${ANGLE_TABLE_HEADER_WORDS}u + 4u * j;
  var cs: vec2<f32>;
  if (angleTable[0] == 0u) {
    cs = cosSinOfTurns(turnsOf(n, vec3<u32>(angleTable[at], angleTable[at + 1u], angleTable[at + 2u])));
  } else {
    // The f32 angle of transformers, vLLM and SGLang; past 2^32 the position is only approximately rounded.
    let count = select(f32OfCount(n.x), f32(n.y) * 4294967296.0 + f32(n.x), n.y != 0u);
    let angle = count * bitcast<f32>(angleTable[at + 3u]);
    if (angle <= 0.785398163) {
      cs = cosSinSmall(angle, 0.0);
    } else {
      let bits = bitcast<u32>(angle);
      let e = clamp(i32((bits >> 23u) & 0xffu) - 150, ${FLOAT32_REDUCTION_EXPONENTS.first}, ${FLOAT32_REDUCTION_EXPONENTS.last});
      let g = angleTable[2] * 4u + ${ANGLE_TABLE_HEADER_WORDS}u + 4u * u32(e - ${FLOAT32_REDUCTION_EXPONENTS.first});
      cs = cosSinOfTurns(turnsOf(vec2<u32>((bits & 0x7fffffu) | 0x800000u, 0u), vec3<u32>(angleTable[g], angleTable[g + 1u], angleTable[g + 2u])));
    }
  }
  let magnitude = bitcast<f32>(angleTable[1]);
  return vec2<f32>(cs.x * magnitude, select(cs.y, -cs.y, negative) * magnitude);
}
`;

export function ropeTableShader(plan: RopeTablePlan): KernelSource<RopeTableParams, RopeTableRanges> {
  const bindings = ROPE_TABLE.bindings();
  const code = `${ROPE_TABLE.uniformsWgsl}
${bindings.wgsl}
${indexReader('positionAt', 'positions', plan.positionType)}
${ROPE_ANGLE_WGSL}
${MROPE_STREAM_WGSL}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  let t = id / params.halfRotary;
  if (t >= params.tokens) { return; }
  let j = id % params.halfRotary;
  // mRoPE: pair j's stream (0 temporal, 1 height, 2 width); streamStride 0 leaves one stream.
  let stream = mropeStream(j);
  let cs = ropeCosSin(positionAt(stream * params.streamStride + t), j);
  let rowBase = t * 2u * params.halfRotary;
  table[rowBase + j] = cs.x;
  table[rowBase + params.halfRotary + j] = cs.y;
}
`;
  return kernelSource(ROPE_TABLE, bindings, code);
}
