/**
 * The start-up probe of the f16 builtins (runtime/f16Conversion.ts): one
 * invocation per 16-bit code decodes codes with `unpack2x16float` and with
 * the integer code, and encodes f32 values at and around every f16 rounding
 * boundary with `pack2x16float` (behind its guard) and with the integer
 * code; any difference sets bit 1 (decode) or bit 2 (encode) of the answer.
 */
import { f16Wgsl, INTEGER_F16 } from './common.wgsl.js';

/** Invocations per workgroup, and workgroups: one invocation per 16-bit code. */
export const F16_PROBE_WORKGROUP = 64;
export const F16_PROBE_WORKGROUPS = 65536 / F16_PROBE_WORKGROUP;

/**
 * Per invocation: its code in the low half of a word and the code's
 * complement in the high half, decoded (a NaN code must give a NaN, any
 * payload: kvkit's arithmetic makes its own; every other code its exact f32).
 * Then four f32 encoded as two words: for a finite code (|h| < 0x7c00) its
 * value and the f32 just below, at and just above the midpoint to the next
 * code (65520 after 65504); for the other codes infinity and NaNs, finite f32
 * from 65504 to the largest, and f32 subnormals. The sign is the code's, and
 * odd codes swap the halves, so each class is met in both.
 */
export const F16_PROBE_WGSL = /* wgsl */ `${f16Wgsl(INTEGER_F16)}
${f16Wgsl({ decode: 'builtin', encode: 'builtin' }, 'B')}
@group(0) @binding(0) var<storage, read_write> answer: atomic<u32>;
fn nan(b: u32) -> bool { return (b & 0x7fffffffu) > 0x7f800000u; }
fn dec(h: u32, x: f32) -> bool { let w = bitcast<u32>(f16ToF32(h)); return select(bitcast<u32>(x) == w, nan(bitcast<u32>(x)), nan(w)); }
fn enc(a: u32, b: u32) -> bool { let v = bitcast<vec2<f32>>(vec2(a, b)); return f32PairToF16B(v) == f32PairToF16(v); }
@compute @workgroup_size(${F16_PROBE_WORKGROUP})
fn main(@builtin(global_invocation_id) id: vec3<u32>) {
let c = id.x;
let p = f16PairToF32B(c | ((c ^ 0xffffu) << 16u));
if (!dec(c, p.x) || !dec(c ^ 0xffffu, p.y)) { atomicOr(&answer, 1u); }
let h = c & 0x7fffu;
let v = bitcast<u32>(f16ToF32(h));
let m = select(v + 0x1000u, bitcast<u32>(f32(2u * h + 1u) * 2.98023223876953125e-8), h < 0x400u);
let e = h & 0x1ffu;
let s = 0x7f800000u | ((e & 0xffu) * 0x8001u);
let g = 0x477fe000u + (e & 0xffu) * 0x378020u;
let u = e * 0x4001u;
var t = select(select(vec4(s, g, u, u + 0x2000u), vec4(u, s, g, u ^ 0x7fffffu), h >= 0x7e00u), vec4(v, m - 1u, m, m + 1u), h < 0x7c00u);
t = select(t, t.yxwz, (h & 1u) == 1u) | vec4((c & 0x8000u) << 16u);
if (!enc(t.x, t.y) || !enc(t.z, t.w)) { atomicOr(&answer, 2u); }
}
`;
