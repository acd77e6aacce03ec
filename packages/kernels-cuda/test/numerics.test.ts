import { Rng, roundToBf16, roundToF16 } from '@kvkit/conformance';
import { describe, expect, it } from 'vitest';
import { decodeHalves, encodeBf16, encodeF16 } from '../src/numerics/halfFloats.js';

const one = (dtype: 'f16' | 'bf16', bits: number) => decodeHalves(dtype, Uint16Array.of(bits))[0]!;

/** Values where rounding goes wrong: ties both ways, the range ends, subnormals, overflow, signed zeros. */
const EDGES = [
  0, -0, 1, -1, 0.1, 1 / 3, 65504, 65519, 65519.99, 65520, 65536, -70000, 2 ** -14, 2 ** -24, 2 ** -25, 3 * 2 ** -25, 2 ** -26, 1e-30, 1e-45, 5e-324,
  1 + 2 ** -11, 1 + 3 * 2 ** -11, 1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -9, 3.4e38, (2 - 2 ** -7) * 2 ** 127, (2 - 2 ** -8) * 2 ** 127, 1.5e-40, 2 ** -126, 2 ** -133, 2 ** -134,
  Infinity, -Infinity,
];

describe('f16 and bf16 on the host', () => {
  it('round f32 values to nearest even, like the conformance rounding (edge values and 20 000 random magnitudes)', () => {
    const rng = new Rng(7);
    const values = EDGES.map((x) => Math.fround(x));
    for (let i = 0; i < 20_000; i++) values.push(Math.fround((rng.next() - 0.5) * 2 ** Math.floor(rng.next() * 80 - 40)));
    for (const x of values) {
      expect(Object.is(one('f16', encodeF16(x)), roundToF16(x)), `f16 of ${x}`).toBe(true);
      expect(Object.is(one('bf16', encodeBf16(x)), roundToBf16(x)), `bf16 of ${x}`).toBe(true);
    }
  });

  it('round f64 values once, not through f32 (no double rounding)', () => {
    // Just above a tie: f32 would first drop the 2^-40 and leave an exact tie, which goes to even (1).
    expect(one('f16', encodeF16(1 + 2 ** -11 + 2 ** -40))).toBe(1 + 2 ** -10);
    expect(one('bf16', encodeBf16(1 + 2 ** -8 + 2 ** -40))).toBe(1 + 2 ** -7);
    expect(one('f16', encodeF16(1 + 2 ** -11))).toBe(1);
    expect(one('bf16', encodeBf16(1 + 3 * 2 ** -8))).toBe(1 + 2 ** -6);
  });

  it('decode then encode gives back every non-NaN bit pattern; NaN stays NaN', () => {
    for (const [dtype, encode] of [['f16', encodeF16], ['bf16', encodeBf16]] as const) {
      const all = new Uint16Array(65536).map((_, i) => i);
      const values = decodeHalves(dtype, all);
      for (let bits = 0; bits < 65536; bits++) {
        const v = values[bits]!;
        if (Number.isNaN(v)) expect(Number.isNaN(one(dtype, encode(v)))).toBe(true);
        else if (encode(v) !== bits) expect.fail(`${dtype} bits ${bits.toString(16)} -> ${v} -> ${encode(v).toString(16)}`);
      }
    }
  });
});
