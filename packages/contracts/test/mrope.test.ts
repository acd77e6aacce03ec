import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { mropeBounds, mropeLayout, mropeStreamOfPair, ropeAngles, writeCosSinRow, writeMropeCosSinRow, writeMropeRow } from '../src/backend/index.js';

/** Three section counts summing to `half`, any of them zero. */
const sections = fc.integer({ min: 1, max: 64 }).chain((half) =>
  fc.tuple(fc.integer({ min: 0, max: half }), fc.integer({ min: 0, max: half })).map(([a, b]) => {
    const [lo, hi] = a <= b ? [a, b] : [b, a];
    return { half, section: [lo, hi - lo, half - hi] as const };
  }),
);

describe('mRoPE streams', () => {
  it("gives each stream a contiguous run of its section's size, in order temporal, height, width", async () => {
    await forEverySeed(100, (run) => fc.assert(
      fc.property(sections, ({ half, section }) => {
        const bounds = mropeBounds(section);
        const streams = Array.from({ length: half }, (_, j) => mropeStreamOfPair(bounds, j));
        for (let s = 0; s < 3; s++) expect(streams.filter((x) => x === s)).toHaveLength(section[s]!);
        for (let j = 1; j < half; j++) expect(streams[j]!).toBeGreaterThanOrEqual(streams[j - 1]!);
      }),
      run,
    ));
  });

  it("writes pair j's cos and sin from its stream's position, both halves alike", async () => {
    await forEverySeed(100, (run) => fc.assert(
      fc.property(sections, fc.tuple(fc.nat(9000), fc.nat(9000), fc.nat(9000)), ({ half, section }, positions) => {
        const angles = ropeAngles({ ropeBase: 10000, rotaryDim: 2 * half });
        const row = new Float64Array(2 * half).fill(Number.NaN);
        writeMropeCosSinRow(row, 0, positions, mropeBounds(section), angles);
        const bounds = mropeBounds(section);
        // Each stream's own one-stream row: the angle function (exact reduction, any scaling) is writeCosSinRow's.
        const own = positions.map((p) => {
          const one = new Float64Array(2 * half);
          writeCosSinRow(one, 0, p, angles);
          return one;
        });
        for (let j = 0; j < half; j++) {
          const s = mropeStreamOfPair(bounds, j);
          expect(row[j]).toBe(own[s]![j]);
          expect(row[half + j]).toBe(own[s]![half + j]);
          // Small positions: within a few ulps of the plain f64 formula too.
          expect(Math.abs(row[j]! - Math.cos(positions[s]! * angles.frequencies[j]!))).toBeLessThan(1e-12);
        }
      }),
      run,
    ));
  });

  it("interleaved (Qwen3-VL): height where j % 3 == 1 below 3·h, width where j % 3 == 2 below 3·w, temporal elsewhere, each stream its section's count", () => {
    // Qwen3-VL's [24, 20, 20] over 64 pairs: T H W T H W ... up to pair 59, then temporal 60 to 63.
    const layout = mropeLayout([24, 20, 20], true);
    expect(layout.ends).toEqual([60, 60]);
    const streams = Array.from({ length: 64 }, (_, j) => mropeStreamOfPair(layout, j));
    expect(streams.slice(0, 7)).toEqual([0, 1, 2, 0, 1, 2, 0]);
    expect(streams.slice(57)).toEqual([0, 1, 2, 0, 0, 0, 0]);
    for (const [s, n] of [24, 20, 20].entries()) expect(streams.filter((x) => x === s)).toHaveLength(n);
    // transformers' apply_interleaved_mrope: freqs_t[..., offset:3·section[dim]:3] = freqs[dim, ..., same slice].
    const hf = Array.from({ length: 64 }, () => 0);
    for (const [dim, offset] of [[1, 1], [2, 2]] as const) for (let j = offset; j < Math.min(3 * [24, 20, 20][dim]!, 64); j += 3) hf[j] = dim;
    expect(streams).toEqual(hf);
    // Qwen3.5 with a partial rotary: [11, 11, 10] over 32 pairs; height's last pair is 31.
    const partial = Array.from({ length: 32 }, (_, j) => mropeStreamOfPair(mropeLayout([11, 11, 10], true), j));
    for (const [s, n] of [11, 11, 10].entries()) expect(partial.filter((x) => x === s)).toHaveLength(n);
    expect(partial[31]).toBe(1);
  });

  it('interleaved rows take each pair from its stream, and fill no stream that owns no pair', () => {
    const angles = ropeAngles({ ropeBase: 5e6, rotaryDim: 128 });
    const layout = mropeLayout([24, 20, 20], true);
    const positions = [3, 1000, 77777];
    const row = new Float64Array(128);
    writeMropeCosSinRow(row, 0, positions, layout, angles);
    const own = positions.map((p) => {
      const one = new Float64Array(128);
      writeCosSinRow(one, 0, p, angles);
      return one;
    });
    for (let j = 0; j < 64; j++) {
      const s = mropeStreamOfPair(layout, j);
      expect([row[j], row[64 + j]]).toEqual([own[s]![j], own[s]![64 + j]]);
    }
    const filled: number[] = [];
    writeMropeRow(new Float64Array(4), 0, 2, mropeLayout([2, 0, 0], true), (s) => void filled.push(s));
    expect(filled).toEqual([0]);
    // The contiguous bounds keep their meaning as a layout.
    expect(Array.from({ length: 8 }, (_, j) => mropeStreamOfPair(mropeLayout([2, 3, 3]), j))).toEqual(Array.from({ length: 8 }, (_, j) => mropeStreamOfPair(mropeBounds([2, 3, 3]), j)));
  });

  it('with the same position in every stream, is the one-stream row', () => {
    const angles = ropeAngles({ ropeBase: 1e6, rotaryDim: 128 });
    const streams = new Float64Array(128);
    const one = new Float64Array(128);
    writeMropeCosSinRow(streams, 0, [777, 777, 777], mropeBounds([16, 24, 24]), angles);
    writeCosSinRow(one, 0, 777, angles);
    expect(streams).toEqual(one);
  });
});
