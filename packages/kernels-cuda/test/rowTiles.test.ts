import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { planRows } from '../src/ops/rowTiles.js';

const shapes = fc.record({
  dtype: fc.constantFrom('f32' as const, 'f16' as const, 'bf16' as const),
  headDim: fc.integer({ min: 2, max: 600 }),
  rotaryFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  gptj: fc.boolean(),
  tokens: fc.integer({ min: 1, max: 200_000 }),
  headRows: fc.integer({ min: 1, max: 300 }),
  misaligned: fc.boolean(),
  multiprocessors: fc.constantFrom(1, 108, 132),
});

describe('row kernel launch plans', () => {
  it('cover every (token, head row) exactly with legal launches, and take the vector path only where rows are whole vectors', () => {
    fc.assert(
      fc.property(shapes, (s) => {
        const rotaryDim = Math.max(2, 2 * Math.floor((s.rotaryFraction * s.headDim) / 2));
        fc.pre(rotaryDim <= s.headDim);
        const vec = s.dtype === 'f32' ? 4 : 8;
        const plan = planRows({ ...s, rotaryDim, vectorAddresses: [0, s.misaligned ? 8 : 16], multiprocessors: s.multiprocessors });
        const whole = s.headDim % vec === 0 && (s.gptj || (rotaryDim / 2) % vec === 0) && !s.misaligned && s.headDim / vec <= 64;
        expect(plan.path !== 'any').toBe(whole);
        expect([64, 128, 256]).toContain(plan.block);
        expect(plan.gridY).toBeLessThanOrEqual(65535);
        if (plan.path === 'any') {
          expect(plan.gridX).toBeGreaterThan(0);
          return;
        }
        const numVec = s.headDim / vec;
        expect(plan.lanesPerRow & (plan.lanesPerRow - 1)).toBe(0);
        expect(plan.lanesPerRow).toBeLessThanOrEqual(32);
        expect(plan.lanesPerRow * (plan.path === 'nv1' ? 1 : 2)).toBeGreaterThanOrEqual(numVec);
        expect(plan.gridX * plan.tokensPerBlock).toBeGreaterThanOrEqual(s.tokens);
        expect((plan.gridX - 1) * plan.tokensPerBlock).toBeLessThan(s.tokens);
        expect(plan.gridY * plan.headRowsPerBlock).toBeGreaterThanOrEqual(s.headRows);
        expect((plan.gridY - 1) * plan.headRowsPerBlock).toBeLessThan(s.headRows);
        expect(plan.sharedBytes).toBeGreaterThanOrEqual(plan.tokensPerBlock * (rotaryDim * 4 + 8));
        expect(plan.sharedBytes).toBeLessThanOrEqual(48 * 1024);
      }),
      { numRuns: 2000 },
    );
  });

  it('spreads small batches over the GPU: T = 16, 5 layers × 8 heads of 128 bf16 fills at least 132 blocks', () => {
    const plan = planRows({ dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens: 16, headRows: 40, vectorAddresses: [0], multiprocessors: 132 });
    expect(plan.path).toBe('nv1');
    expect(plan.gridX * plan.gridY).toBeGreaterThanOrEqual(132);
  });

  it('packs whole tokens so the last pass of a block has no idle lane groups where it can', () => {
    const plan = planRows({ dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens: 32768, headRows: 40, vectorAddresses: [0], multiprocessors: 132 });
    expect((plan.tokensPerBlock * plan.headRowsPerBlock) % (plan.block / plan.lanesPerRow)).toBe(0);
  });
});
