import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { LAUNCHES } from '../src/generated/kernels.js';
import { planRows, ROW_KERNEL_SHAPES, VECTOR_PATH_MAX_ROWS } from '../src/ops/rowTiles.js';
import type { RowKernel, RowLaunch, RowShape } from '../src/ops/rowTiles.js';
import { gpuOf, H200, SUPPORTED_GPUS } from './supportedGpus.js';
import type { SupportedGpu } from './supportedGpus.js';

const shapes = fc.record({
  kernel: fc.constantFrom('normRope' as const, 'ropePool' as const),
  dtype: fc.constantFrom('f32' as const, 'f16' as const, 'bf16' as const),
  headDim: fc.integer({ min: 2, max: 600 }),
  rotaryFraction: fc.double({ min: 0, max: 1, noNaN: true }),
  gptj: fc.boolean(),
  tokens: fc.integer({ min: 1, max: 200_000 }),
  headRows: fc.integer({ min: 1, max: 300 }),
  misaligned: fc.boolean(),
  gpu: fc.constantFrom(...SUPPORTED_GPUS),
  oneMultiprocessor: fc.boolean(),
});

/** The cos/sin slots of a token tile's token (TileAngles in rope_pool_tiles.cuh): gptj rounds the pairs up to whole vectors. */
function tileSlots(s: Pick<RowShape, 'dtype' | 'rotaryDim' | 'gptj'>): number {
  const vec = s.dtype === 'f32' ? 4 : 8;
  const pairsPerVector = s.gptj ? vec / 2 : vec;
  return Math.ceil((s.rotaryDim >> 1) / pairsPerVector) * pairsPerVector;
}

/**
 * What keeps `plan` from being a legal launch of `s` on `s.gpu` (threads,
 * shared memory a block and a multiprocessor, grid), or from covering its
 * rows: one line each, none for a good plan. Plain checks, not expect(), so
 * a sweep of every shape stays fast.
 */
function launchProblems(s: RowShape, plan: RowLaunch, gpu: SupportedGpu): string[] {
  const problems: string[] = [];
  const need = (ok: boolean, what: string) => {
    if (!ok) problems.push(what);
  };
  const vec = s.dtype === 'f32' ? 4 : 8;
  need(plan.grid >= 1 && plan.grid <= 2 ** 31 - 1, `grid ${plan.grid}`);
  need(plan.sharedBytes <= gpu.sharedBytesPerBlock, `${plan.sharedBytes} B of shared memory a block, past ${gpu.sharedBytesPerBlock}`);
  if (plan.path === 'any') {
    need(plan.block === LAUNCHES[s.kernel === 'normRope' ? 'fusedNormRope' : 'ropePool'].any.threads && plan.sharedBytes === 0, 'element path launch');
    need(plan.grid <= gpu.multiprocessors * 32, `element path grid ${plan.grid}`);
    return problems;
  }
  const declared = ROW_KERNEL_SHAPES[s.kernel][plan.path];
  const launch = LAUNCHES[s.kernel === 'normRope' ? 'fusedNormRope' : 'ropePool'][plan.path];
  need([64, 128, 256].includes(plan.block) && plan.block <= launch.threads, `block ${plan.block} under launch bounds of ${launch.threads}`);
  need((plan.lanesPerRow & (plan.lanesPerRow - 1)) === 0 && plan.lanesPerRow <= 32 && plan.block % plan.lanesPerRow === 0, `lanes ${plan.lanesPerRow}`);
  need(plan.lanesPerRow * (plan.path === 'nv1' && !plan.pairedLanes ? 1 : 2) >= s.headDim / vec, `lanes ${plan.lanesPerRow} for ${s.headDim / vec} vectors`);
  // Paired lanes hold a vector and its neox partner: only where the rotation covers the row, in exactly half the row's vectors' lanes.
  if (plan.pairedLanes) need(!s.gptj && s.rotaryDim === s.headDim && plan.lanesPerRow * 2 === s.headDim / vec, `paired lanes ${plan.lanesPerRow} for ${s.headDim / vec} vectors`);
  // The blocks the grid is sized for fit a multiprocessor at once: threads and shared memory, the driver's reserve included.
  const resident = plan.blocksPerMultiprocessor;
  need(resident >= 1 && resident <= declared.blocksPerSM, `${resident} blocks a multiprocessor, declared ${declared.blocksPerSM}`);
  need(resident * plan.block <= gpu.maxThreadsPerMultiprocessor, `${resident} blocks of ${plan.block} threads a multiprocessor`);
  need(resident * (plan.sharedBytes + gpu.reservedSharedBytesPerBlock) <= gpu.sharedBytesPerMultiprocessor, `${resident} blocks of ${plan.sharedBytes} B shared a multiprocessor of ${gpu.sharedBytesPerMultiprocessor}`);
  if (plan.tokensPerBlock > 0) {
    // ropePool's token tiles: a block per tile, every token in exactly one, the tile's cos/sin and slots in shared memory.
    need(s.kernel === 'ropePool' && plan.path === 'nv1', 'token tiles off ropePool nv1');
    need([1, 2, 4, 8].includes(plan.tokensPerBlock), `tokens a tile ${plan.tokensPerBlock}`);
    need(plan.grid * plan.tokensPerBlock >= s.tokens && (plan.grid - 1) * plan.tokensPerBlock < s.tokens, `grid ${plan.grid} of ${plan.tokensPerBlock}-token tiles for ${s.tokens}`);
    // Each thread's staged rows (batches of rowsPerStep 16-byte vectors), the two norm weights as f32, then the tile's.
    const { rowsPerStep, stagedBatches } = LAUNCHES.ropePool.nv1;
    const bytes = (t: number) => plan.block * 16 * rowsPerStep * stagedBatches + 2 * s.headDim * 4 + t * (tileSlots(s) * 8 + 8);
    need(plan.sharedBytes === bytes(plan.tokensPerBlock), `tile shared memory ${plan.sharedBytes}, kernel layout ${bytes(plan.tokensPerBlock)}`);
    // A larger tile never cost a resident block: as many as one-token tiles get.
    const fit = (t: number) => Math.min(declared.blocksPerSM, Math.floor(gpu.sharedBytesPerMultiprocessor / (bytes(t) + gpu.reservedSharedBytesPerBlock)));
    need(resident === fit(1), `${resident} tiles a multiprocessor where ${fit(1)} fit`);
    return problems;
  }
  need(plan.unitsPerToken * plan.rowsPerUnit >= s.headRows && (plan.unitsPerToken - 1) * plan.rowsPerUnit < s.headRows, `units ${plan.unitsPerToken} × ${plan.rowsPerUnit} for ${s.headRows} rows`);
  // Persistent: never more blocks than the multiprocessors hold at once, and none without a unit.
  need(plan.grid * plan.block <= gpu.multiprocessors * resident * launch.threads, `grid ${plan.grid} × ${plan.block} past one resident wave`);
  need((plan.grid - 1) * (plan.block / plan.lanesPerRow) < s.tokens * plan.unitsPerToken, `grid ${plan.grid} with blocks of no unit`);
  // Each thread's cos/sin slots.
  need(plan.sharedBytes === plan.block * 2 * (plan.path === 'nv1' ? 1 : 2) * vec * 4, `unit walk shared memory ${plan.sharedBytes}`);
  return problems;
}

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
  it('are legal launches that take the vector path only where rows are whole vectors, one resident wave of blocks at most', () =>
    forEverySeed(2000, (run) =>
      fc.assert(
        fc.property(shapes, (s) => {
          const rotaryDim = Math.max(2, 2 * Math.floor((s.rotaryFraction * s.headDim) / 2));
          fc.pre(rotaryDim <= s.headDim);
          const vec = s.dtype === 'f32' ? 4 : 8;
          const gpu = s.oneMultiprocessor ? { ...s.gpu, multiprocessors: 1 } : s.gpu;
          const shape = { ...s, rotaryDim, vectorAddresses: [0, s.misaligned ? 8 : 16], gpu };
          const plan = planRows(shape);
          const whole = s.headDim % vec === 0 && (s.gptj || (rotaryDim / 2) % vec === 0) && !s.misaligned && s.headDim / vec <= 64;
          expect(plan.path !== 'any').toBe(whole);
          expect(launchProblems(shape, plan, gpu)).toEqual([]);
        }),
        {
          ...run,
          // Found by fast-check (seed -1284848999): 8-token tiles of 42112 B, of which sm_80's 164 KiB holds 3, not the declared 4.
          examples: [[{ kernel: 'ropePool', dtype: 'bf16', headDim: 232, rotaryFraction: 226 / 232, gptj: true, tokens: 25, headRows: 1, misaligned: false, gpu: gpuOf('sm_80'), oneMultiprocessor: true }]],
        },
      ),
    ));

  it('shrink token tiles until the declared blocks fit a multiprocessor: D = 232, R = 226 gptj bf16 on one sm_80 multiprocessor', () => {
    const gpu = { ...gpuOf('sm_80'), multiprocessors: 1 };
    const shape = { kernel: 'ropePool', dtype: 'bf16', headDim: 232, rotaryDim: 226, gptj: true, tokens: 25, headRows: 1, vectorAddresses: [0, 16], gpu } as const;
    const plan = planRows(shape);
    expect(launchProblems(shape, plan, gpu)).toEqual([]);
    // Eight tokens a tile took 42112 B: 4 blocks and their reserve need 172544 B of the 167936.
    expect([plan.tokensPerBlock, plan.sharedBytes, plan.blocksPerMultiprocessor]).toEqual([4, 38368, 4]);
  });

  it('keep two token-tile blocks a multiprocessor where 100 KiB holds no more (sm_86, sm_89, sm_120), tiles as large as elsewhere', () => {
    for (const arch of ['sm_86', 'sm_89', 'sm_120']) {
      const gpu = gpuOf(arch);
      const shape = { kernel: 'ropePool', dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens: 32768, headRows: 48, vectorAddresses: [0], gpu } as const;
      const plan = planRows(shape);
      expect(launchProblems(shape, plan, gpu), arch).toEqual([]);
      expect([plan.tokensPerBlock, plan.blocksPerMultiprocessor], arch).toEqual([8, 2]);
    }
  });

  it('walk every (token, row) exactly once, every lane of a warp taking the same steps', async () => {
    const small = fc.record({
      kernel: fc.constantFrom('normRope' as const, 'ropePool' as const),
      dtype: fc.constantFrom('f32' as const, 'bf16' as const),
      headDim: fc.constantFrom(32, 64, 128, 256),
      tokens: fc.integer({ min: 1, max: 300 }),
      headRows: fc.integer({ min: 1, max: 60 }),
      multiprocessors: fc.constantFrom(1, 3, 132),
    });
    await forEverySeed(300, (run) => fc.assert(
      fc.property(small, (s) => {
        const plan = planRows({ ...s, rotaryDim: s.headDim, gptj: false, vectorAddresses: [0], gpu: { ...H200, multiprocessors: s.multiprocessors } });
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
      run,
    ));
  });

  it('spreads small batches over the GPU: T = 16, 5 layers × 8 heads of 128 bf16 fills at least 132 blocks', () => {
    const plan = planRows({ kernel: 'normRope', dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens: 16, headRows: 40, vectorAddresses: [0], gpu: H200 });
    expect(plan.path).toBe('nv1');
    expect(plan.grid).toBeGreaterThanOrEqual(132);
  });

  it('walk every row of a token tile exactly once, in each of its two passes (query rows; key and value rows)', async () => {
    // The tile walk of src/cuda/rope_pool_tiles.cuh (TileRows): group g of G takes rows g, g + G, ... of [0, tokens * heads).
    const tile = fc.record({ tokens: fc.integer({ min: 1, max: 8 }), heads: fc.integer({ min: 1, max: 80 }), lanes: fc.constantFrom(1, 2, 4, 8, 16, 32), depth: fc.integer({ min: 1, max: 6 }) });
    await forEverySeed(500, (run) => fc.assert(
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
      run,
    ));
  });

  it('tiles large batches as far as the grid still fills the GPU once, and small ones a token a block', () => {
    const plan = (tokens: number) => planRows({ kernel: 'ropePool', dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens, headRows: 48, vectorAddresses: [0], gpu: H200 });
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
        const plan = planRows({ kernel, dtype: 'bf16', headDim: 128, rotaryDim: 128, gptj: false, tokens, headRows, vectorAddresses: [0], gpu: H200 });
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
    const shape = { kernel: 'normRope' as const, dtype: 'bf16' as const, headDim: 128, rotaryDim: 128, gptj: false, vectorAddresses: [0, 256], gpu: H200 };
    const headRows = 32;
    const fits = Math.floor(VECTOR_PATH_MAX_ROWS / headRows);
    expect(planRows({ ...shape, tokens: fits, headRows }).path).toBe('nv1');
    const past = planRows({ ...shape, tokens: fits + 1, headRows });
    expect(past.path).toBe('any');
    expect(past.grid).toBeLessThanOrEqual(132 * 32);
  });
});


/**
 * Every shape the contracts accept, on every supported GPU, from one
 * multiprocessor up. What a plan reads of a shape: the dtype, D and R (and the
 * style, for neox's halves on vector boundaries) choose the path, the lanes
 * and a token tile's bytes; tokens and rows a token only size the grid and the
 * tile. So every dtype, D, R and style is swept at a token count that takes
 * the largest tile and block (the most shared memory), and the token counts
 * apart, at every boundary where the plan changes, over a D of every vector
 * count. Past 64 vectors a row (D > 512, or 256 in f32) every shape takes the
 * element-by-element path, which reads neither D nor R: a few such D stand
 * for the rest.
 */
describe('row kernel launch plans over the whole domain of the contracts', () => {
  const gpus = SUPPORTED_GPUS.flatMap((g) => [g, { ...g, multiprocessors: 1 }]);
  const kernels: readonly RowKernel[] = ['normRope', 'ropePool'];
  const dtypes = ['f32', 'f16', 'bf16'] as const;
  const check = (shape: RowShape, gpu: SupportedGpu, failures: string[]) => {
    const problems = launchProblems(shape, planRows(shape), gpu);
    if (problems.length > 0 && failures.length < 20) failures.push(`${gpu.arch} ×${gpu.multiprocessors} ${JSON.stringify({ ...shape, gpu: undefined })}: ${problems.join('; ')}`);
  };

  it('fit every GPU for every dtype, head dim, rotary dim and style, at the most shared memory', () => {
    const failures: string[] = [];
    let plans = 0;
    const headDims = [...Array.from({ length: 599 }, (_, i) => i + 2), 601, 1024, 4096, 65536, 2 ** 20];
    for (const gpu of gpus) {
      for (const kernel of kernels) {
        for (const dtype of dtypes) {
          for (const headDim of headDims) {
            for (let rotaryDim = 2; rotaryDim <= headDim; rotaryDim += headDim > 600 ? headDim - 2 : 2) {
              for (const gptj of [false, true]) {
                for (const vectorAddresses of [[0, 16], [0, 8]]) {
                  check({ kernel, dtype, headDim, rotaryDim, gptj, tokens: 1 << 20, headRows: 3, vectorAddresses, gpu }, gpu, failures);
                  plans++;
                }
              }
            }
          }
        }
      }
    }
    expect(failures).toEqual([]);
    console.log(`${plans} plans`);
  });

  it('fit every GPU at every token count where a plan changes, for head dims of every vector count', () => {
    const failures: string[] = [];
    let plans = 0;
    for (const gpu of gpus) {
      // Tiles halve, and the unit walk's waves and blocks change, where tokens (times units) cross multiples of the resident blocks or groups.
      const crossings = [1, 2, 4, 8].flatMap((t) => [1, 2, 3, 4].flatMap((b) => [1, 32, 256].flatMap((g) => [-1, 0, 1].map((d) => t * b * g * gpu.multiprocessors + d))));
      const counts = [...new Set([...Array.from({ length: 64 }, (_, i) => i + 1), ...crossings])].filter((n) => n >= 1);
      for (const kernel of kernels) {
        for (const dtype of dtypes) {
          const vec = dtype === 'f32' ? 4 : 8;
          for (let vectors = 1; vectors <= 64; vectors++) {
            const headDim = vectors * vec;
            for (const [rotaryDim, gptj] of [[headDim, false], [2, true]] as const) {
              for (const headRows of [1, 3, 5, 48, 257]) {
                const most = Math.floor(VECTOR_PATH_MAX_ROWS / headRows);
                for (const tokens of [...counts, most, most + 1]) {
                  check({ kernel, dtype, headDim, rotaryDim, gptj, tokens, headRows, vectorAddresses: [0], gpu }, gpu, failures);
                  plans++;
                }
              }
            }
          }
        }
      }
    }
    expect(failures).toEqual([]);
    console.log(`${plans} plans`);
  });
});
