import { decodeHalves } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { createCpuBackend, roundToBf16, roundToF16 } from '../src/index.js';

// The codec itself is tested exhaustively in @kvkit/contracts; here, that the CPU backend's storage uses it for every kind of input.

const allCodes = Uint16Array.from({ length: 65536 }, (_, c) => c);

/** Doubles where rounding is decided: random magnitudes across both formats' ranges, exact ties and their f64 neighbours. */
function probeValues(count: number): number[] {
  let s = 0x9e3779b9;
  const next = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
  const values: number[] = [0, -0, 65504, 65520, -65519.99, 2 ** -25, 3 * 2 ** -25, 2 ** -134, 3.4e38, 1e39, Infinity, -Infinity, Number.NaN];
  while (values.length < count) {
    const x = (next() - 0.5) * 2 ** Math.floor(next() * 300 - 150);
    const tie = (roundToF16(x) + roundToF16(x * (1 + 2 ** -10))) / 2;
    values.push(x, tie, tie * (1 + 2 ** -52), Math.fround(x));
  }
  return values.slice(0, count);
}

describe('f16 and bf16 storage', () => {
  for (const dtype of ['f16', 'bf16'] as const) {
    it(`every ${dtype} value survives tensor() and read() bit for bit`, async () => {
      const backend = createCpuBackend();
      const values = decodeHalves(dtype, allCodes);
      const back = await backend.read(backend.tensor(dtype, [65536], Array.from(values)));
      const bad: string[] = [];
      for (let c = 0; c < 65536; c++) if (!Object.is(back[c], values[c])) bad.push(`0x${c.toString(16)}: ${values[c]} read back as ${back[c]}`);
      expect(bad.slice(0, 5)).toEqual([]);
    });

    it(`tensor('${dtype}') rounds each value once, to nearest even, from a number[], a Float64Array and a Float32Array alike`, async () => {
      const backend = createCpuBackend();
      const round = dtype === 'f16' ? roundToF16 : roundToBf16;
      const values = probeValues(4099);
      const want = values.map(round);
      for (const data of [values, Float64Array.from(values)]) {
        const got = Array.from(await backend.read(backend.tensor(dtype, [values.length], data)));
        expect(got.every((v, i) => Object.is(v, want[i]) || (Number.isNaN(v) && Number.isNaN(want[i])))).toBe(true);
      }
      const narrow = Float32Array.from(values);
      const got = Array.from(await backend.read(backend.tensor(dtype, [narrow.length], narrow)));
      expect(got.every((v, i) => Object.is(v, round(narrow[i]!)) || (Number.isNaN(v) && Number.isNaN(narrow[i]!)))).toBe(true);
      // Straight from the double: through f32 this would be an exact tie, and go to even.
      const aboveTie = dtype === 'f16' ? 1 + 2 ** -11 + 2 ** -40 : 1 + 2 ** -8 + 2 ** -40;
      expect(await backend.read(backend.tensor(dtype, [1], [aboveTie]))).toEqual(new Float32Array([dtype === 'f16' ? 1 + 2 ** -10 : 1 + 2 ** -7]));
    });
  }
});
