import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LAUNCHES } from '../src/generated/kernels.js';
import { planRows, ROW_KERNEL_SHAPES, VECTOR_PATH_MAX_ROWS } from '../src/ops/rowTiles.js';
import type { RowLaunch } from '../src/ops/rowTiles.js';

const shapes = fc.record({
  kernel: fc.constantFrom('normRope' as const, 'ropePool' as const),
  dtype: fc.constantFrom('f32' as const, 'f16' as const, 'bf16' as const),
  headDim: fc.integer({ min: 2, max: 600 }),
  rotaryFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  gptj: fc.boolean(),
  tokens: fc.integer({ min: 1, max: 200_000 }),
  headRows: fc.integer({ min: 1, max: 300 }),
  misaligned: fc.boolean(),
  multiprocessors: fc.constantFrom(1, 108, 132),
});

/**
 * The rows each lane group visits, step by step, as src/cuda/unit_walk.cuh
 * walks them: a warp's groups take the steps of its first group; unit
 * u = chunk * T + t covers rows [chunk * rowsPerUnit, ...) of token t.
 */
function walkRows(plan: RowLaunch, tokens: number, headRows: number, rowsPerStep: number): { visits: Map<number, number>; stepsPerWarp: Set<string> } {
  const groupsPerBlock = plan.block / plan.lanesPerRow;
  const groups = plan.grid * groupsPerBlock;
  const units = tokens * plan.unitsPerToken;
  const perWarp = Math.max(1, 32 / plan.lanesPerRow);
  const visits = new Map<number, number>();
  const stepsPerWarp = new Set<string>();
  for (let block = 0; block < plan.grid; block++) {
    for (let g = 0; g < groupsPerBlock; g++) {
      const warpFirst = block * groupsPerBlock + Math.floor(g / perWarp) * perWarp;
      const inWarp = g % perWarp;
      let steps = 0;
      for (let warpUnit = warpFirst; warpUnit < units; warpUnit += groups) {
        for (let r = 0; r < plan.rowsPerUnit; r += rowsPerStep) {
          steps++;
          const unit = warpUnit + inWarp;
          if (unit >= units) continue;
          const chunk = Math.floor(unit / tokens);
          const t = unit - chunk * tokens;
          const first = chunk * plan.rowsPerUnit;
          const here = Math.min(plan.rowsPerUnit, headRows - first);
          for (let i = 0; i < rowsPerStep && r + i < here; i++) {
            const key = t * headRows + first + r + i;
            visits.set(key, (visits.get(key) ?? 0) + 1);
          }
        }
      }
      stepsPerWarp.add(`${block}/${Math.floor(g / perWarp)}:${steps}`);
    }
  }
  return { visits, stepsPerWarp };
}

describe('row kernel launch plans', () => {
  it('are legal launches that take the vector path only where rows are whole vectors, one resident wave of blocks at most', () => {
    fc.assert(
      fc.property(shapes, (s) => {
        const rotaryDim = Math.max(2, 2 * Math.floor((s.rotaryFraction * s.headDim) / 2));
        fc.pre(rotaryDim <= s.headDim);
        const vec = s.dtype === 'f32' ? 4 : 8;
        const plan = planRows({ ...s, rotaryDim, vectorAddresses: [0, s.misaligned ? 8 : 16], multiprocessors: s.multiprocessors });
        const whole = s.headDim % vec === 0 && (s.gptj || (rotaryDim / 2) % vec === 0) && !s.misaligned && s.headDim / vec <= 64;
        expect(plan.path !== 'any').toBe(whole);
        expect([64, 128, 256]).toContain(plan.block);
        expect(plan.grid).toBeGreaterThan(0);
        if (plan.path === 'any') return;
        const numVec = s.headDim / vec;
        if (plan.tokensPerBlock > 0) {
          // ropePool's token tiles: a block per tile, every token in exactly one, the tile's cos/sin and slots in shared memory.
          expect(s.kernel === 'ropePool' && plan.path === 'nv1').toBe(true);
          expect([1, 2, 4, 8]).toContain(plan.tokensPerBlock);
          expect(plan.grid * plan.tokensPerBlock).toBeGreaterThanOrEqual(s.tokens);
          expect((plan.grid - 1) * plan.tokensPerBlock).toBeLessThan(s.tokens);
          expect(plan.lanesPerRow).toBeGreaterThanOrEqual(numVec);
          const pairsPerVector = s.gptj ? vec / 2 : vec;
          const slots = Math.ceil((rotaryDim >> 1) / pairsPerVector) * pairsPerVector;
          // Each thread's staged rows (batches of rowsPerStep 16-byte vectors), the two norm weights as f32, then the tile's.
          const { rowsPerStep, stagedBatches, minBlocksPerSM } = LAUNCHES.ropePool.nv1;
          expect(plan.sharedBytes).toBe(plan.block * 16 * rowsPerStep * stagedBatches + 2 * s.headDim * 4 + plan.tokensPerBlock * (slots * 8 + 8));
          expect(plan.sharedBytes).toBeLessThanOrEqual(48 * 1024);
          // The declared blocks per multiprocessor fit in an sm_80/sm_90 multiprocessor's shared memory (164 KiB on sm_80).
          expect(plan.sharedBytes * minBlocksPerSM).toBeLessThanOrEqual(164 * 1024);
          return;
        }
        expect(plan.lanesPerRow & (plan.lanesPerRow - 1)).toBe(0);
        expect(plan.lanesPerRow).toBeLessThanOrEqual(32);
        expect(plan.lanesPerRow * (plan.path === 'nv1' ? 1 : 2)).toBeGreaterThanOrEqual(numVec);
        // Units cover a token's rows exactly: the last one is not empty.
        expect(plan.unitsPerToken * plan.rowsPerUnit).toBeGreaterThanOrEqual(s.headRows);
        expect((plan.unitsPerToken - 1) * plan.rowsPerUnit).toBeLessThan(s.headRows);
        // Persistent: never more blocks than the multiprocessors hold at once, and none without a unit.
        const { blocksPerSM } = ROW_KERNEL_SHAPES[s.kernel][plan.path];
        expect(plan.grid * plan.block).toBeLessThanOrEqual(s.multiprocessors * blocksPerSM * 256);
        expect((plan.grid - 1) * (plan.block / plan.lanesPerRow)).toBeLessThan(s.tokens * plan.unitsPerToken);
        // Each thread's cos/sin slots, within what a block may use without opting in.
        expect(plan.sharedBytes).toBe(plan.block * 2 * (plan.path === 'nv1' ? 1 : 2) * vec * 4);
        expect(plan.sharedBytes).toBeLessThanOrEqual(48 * 1024);
        expect(plan.sharedBytes * blocksPerSM).toBeLessThanOrEqual(164 * 1024);
      }),
      { numRuns: 2000 },
    );
  });

  it('walk every (token, row) exactly once, every lane of a warp taking the same steps', () => {
    const small = fc.record({
      kernel: fc.constantFrom('normRope' as const, 'ropePool' as const),
      dtype: fc.constantFrom('f32' as const, 'bf16' as const),
      headDim: fc.constantFrom(32, 64, 128, 256),
      tokens: fc.integer({ min: 1, max: 300 }),
      headRows: fc.integer({ min: 1, max: 60 }),
      multiprocessors: fc.constantFrom(1, 3, 132),
    });
    fc.assert(
      fc.property(small, (s) => {
        const plan = planRows({ ...s, rotaryDim: s.headDim, gptj: false, vectorAddresses: [0], multiprocessors: s.multiprocessors });
        expect(plan.path).not.toBe('any');
        fc.pre(plan.tokensPerBlock === 0); // token tiles: their walk is checked below
        const { rowsPerStep } = ROW_KERNEL_SHAPES[s.kernel][plan.path as 'nv1' | 'nv2'];
        const { visits, stepsPerWarp } = walkRows(plan, s.tokens, s.headRows, rowsPerStep);
        expect(visits.size).toBe(s.tokens * s.headRows);
        expect([...visits.values()].every((n) => n === 1)).toBe(true);
        // One entry per warp: its groups agree on the number of steps.
        const warps = new Set([...stepsPerWarp].map((k) => k.split(':')[0]));
        expect(stepsPerWarp.size).toBe(warps.size);
      }),
      { numRuns: 300 },
    );
  });

  it('spreads small batches over the GPU: T = 16, 5 layers × 8 heads of 128 bf16 fills at least 132 blocks', () => {
    const plan = planRows({ kernel: 'normRope', dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens: 16, headRows: 40, vectorAddresses: [0], multiprocessors: 132 });
    expect(plan.path).toBe('nv1');
    expect(plan.grid).toBeGreaterThanOrEqual(132);
  });

  it('walk every row of a token tile exactly once, in each of its two passes (query rows; key and value rows)', () => {
    // The tile walk of src/cuda/rope_pool_tiles.cuh (TileRows): group g of G takes rows g, g + G, ... of [0, tokens * heads).
    const tile = fc.record({ tokens: fc.integer({ min: 1, max: 8 }), heads: fc.integer({ min: 1, max: 80 }), lanes: fc.constantFrom(1, 2, 4, 8, 16, 32), depth: fc.integer({ min: 1, max: 6 }) });
    fc.assert(
      fc.property(tile, ({ tokens, heads, lanes, depth }) => {
        const groups = 256 / lanes;
        const seen = new Map<string, number>();
        for (let g = 0; g < groups; g++) {
          const at = { token: Math.floor(g / heads), head: g % heads };
          const advance = (r: { token: number; head: number }) => {
            r.head += groups;
            while (r.head >= heads) (r.head -= heads), r.token++;
          };
          while (at.token < tokens) {
            const row = { ...at };
            for (let d = 0; d < depth; d++) advance(at);
            for (let d = 0; d < depth; d++) {
              if (row.token < tokens) seen.set(`${row.token}/${row.head}`, (seen.get(`${row.token}/${row.head}`) ?? 0) + 1);
              advance(row);
            }
          }
        }
        expect(seen.size).toBe(tokens * heads);
        expect([...seen.values()].every((n) => n === 1)).toBe(true);
      }),
      { numRuns: 500 },
    );
  });

  it('tiles large batches as far as the grid still fills the GPU once, and small ones a token a block', () => {
    const plan = (tokens: number) => planRows({ kernel: 'ropePool', dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens, headRows: 48, vectorAddresses: [0], multiprocessors: 132 });
    const resident = 132 * ROW_KERNEL_SHAPES.ropePool.nv1.blocksPerSM;
    expect(plan(32768).tokensPerBlock).toBe(8);
    for (const tokens of [16, 256, 4096, 32768, 100_000]) {
      const p = plan(tokens);
      expect(p.grid >= resident || p.tokensPerBlock === 1, `T=${tokens}`).toBe(true);
    }
    expect(plan(256).tokensPerBlock).toBe(1);
  });

  it('keeps every group of a full GPU busy for large batches, with long units (cos/sin fetched once per unit)', () => {
    for (const [kernel, headRows] of [['normRope', 40]] as const) {
      for (const tokens of [4096, 32768]) {
        const plan = planRows({ kernel, dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens, headRows, vectorAddresses: [0], multiprocessors: 132 });
        const units = tokens * plan.unitsPerToken;
        const groups = plan.grid * (plan.block / plan.lanesPerRow);
        const waves = Math.ceil(units / groups);
        expect(units / (waves * groups), `${kernel} T=${tokens}: share of group-steps with work`).toBeGreaterThan(0.9);
        expect(plan.rowsPerUnit, `${kernel} T=${tokens}`).toBeGreaterThanOrEqual(8);
      }
    }
  });
});

describe('launches past the 32-bit unit walk', () => {
  it('take the element-by-element kernel from 2^31 rows on, whose counters are 64-bit', () => {
    const shape = { kernel: 'normRope' as const, dtype: 'bf16' as const, headDim: 128, rotaryDim: 128, gptj: false, vectorAddresses: [0, 256], multiprocessors: 132 };
    const headRows = 32;
    const fits = Math.floor(VECTOR_PATH_MAX_ROWS / headRows);
    expect(planRows({ ...shape, tokens: fits, headRows }).path).toBe('nv1');
    const past = planRows({ ...shape, tokens: fits + 1, headRows });
    expect(past.path).toBe('any');
    expect(past.grid).toBeLessThanOrEqual(132 * 32);
  });
});

