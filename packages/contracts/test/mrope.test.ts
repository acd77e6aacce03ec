import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { mropeBounds, mropeStreamOfPair, ropeAngles, writeCosSinRow, writeMropeCosSinRow } from '../src/backend/index.js';

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

  it('with the same position in every stream, is the one-stream row', () => {
    const angles = ropeAngles({ ropeBase: 1e6, rotaryDim: 128 });
    const streams = new Float64Array(128);
    const one = new Float64Array(128);
    writeMropeCosSinRow(streams, 0, [777, 777, 777], mropeBounds([16, 24, 24]), angles);
    writeCosSinRow(one, 0, 777, angles);
    expect(streams).toEqual(one);
  });
});
