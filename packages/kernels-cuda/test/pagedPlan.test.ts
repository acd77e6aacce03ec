import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { forEverySeed } from '../../../propertySeeds.js';
import { LAUNCHES } from '../src/generated/kernels.js';
import { attentionLaunch, attentionSharedBytes, chooseLaunches, DECODE_ROWS, pagedTuning, planPagedAttention } from '../src/ops/pagedAttention.js';
import type { PagedPlan, PagedShape } from '../src/ops/pagedAttention.js';
import { H200, SUPPORTED_GPUS } from './supportedGpus.js';

type Launch = keyof (typeof LAUNCHES)['pagedAttention'];
const LAUNCH_NAMES = Object.keys(LAUNCHES.pagedAttention) as Launch[];

/** The attention kernels' own static shared memory (RequestState and the pass's positions), with room to spare. */
const STATIC_SHARED_BYTES = 1024;
/** The most dynamic shared memory one block may opt into on the 100 KiB parts (sm_86, sm_89, sm_120). */
const SMALLEST_BLOCK_OPT_IN = 99 * 1024;

/** What the call's split looks like to paged_attention.cu: a model of findWork, block by block. */
interface BlockWork {
  readonly request: number;
  readonly j0: number;
  readonly j1: number;
  readonly passes: number[];
  readonly split: boolean;
  readonly piece: number;
}

/** findWork (paged_attention.cu) on the host: the request of a piece, its tokens and the passes one of its blocks takes. */
function findWork(plan: PagedPlan, qIndptr: readonly number[], kvIndptr: readonly number[], piece: number, slot: number, rowsPerRequest: (b: number) => number, rowsPerPass: number): BlockWork | undefined {
  const B = qIndptr.length - 1;
  const T = plan.tokensPerSplit;
  const first = (b: number) => Math.floor(kvIndptr[b]! / T) + b;
  let lo = 0;
  let hi = B;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (first(mid) <= piece) lo = mid;
    else hi = mid;
  }
  const kvLen = kvIndptr[lo + 1]! - kvIndptr[lo]!;
  const qLen = qIndptr[lo + 1]! - qIndptr[lo]!;
  if (qLen <= 0 || kvLen <= 0) return undefined;
  const pieces = Math.ceil(kvLen / T);
  const k = piece - first(lo);
  if (k < 0 || k >= pieces) return undefined;
  const split = pieces > 1 && qLen <= plan.splitQueries;
  const total = Math.ceil(rowsPerRequest(lo) / rowsPerPass);
  const [passFirst, passStep] = split ? [slot, plan.passSlots] : [k * plan.passSlots + slot, pieces * plan.passSlots];
  const passes: number[] = [];
  for (let pass = passFirst; pass < total; pass += passStep) passes.push(pass);
  return { request: lo, j0: split ? k * T : 0, j1: split ? Math.min(kvLen, (k + 1) * T) : kvLen, passes, split, piece };
}

const calls = fc.record({
  lengths: fc.array(fc.tuple(fc.integer({ min: 0, max: 40 }), fc.integer({ min: 0, max: 20_000 })), { minLength: 1, maxLength: 40 }),
  group: fc.constantFrom(1, 2, 4, 8),
  H: fc.integer({ min: 1, max: 8 }),
  D: fc.constantFrom(8, 64, 80, 128, 256, 576),
  dtype: fc.constantFrom('f32' as const, 'bf16' as const),
  slots: fc.integer({ min: 1, max: 1200 }),
});

describe('pagedAttention launch plans', () => {
  it('every launch fits one block of the smallest supported part, fp8 pools or not', () => {
    for (const launch of LAUNCH_NAMES) {
      for (const fp8 of [false, true]) expect(attentionSharedBytes(launch, fp8) + STATIC_SHARED_BYTES, `${launch}${fp8 ? ' fp8' : ''}`).toBeLessThanOrEqual(SMALLEST_BLOCK_OPT_IN);
    }
    expect(SUPPORTED_GPUS.every((g) => g.sharedBytesPerMultiprocessor >= SMALLEST_BLOCK_OPT_IN + 1024)).toBe(true);
  });

  it('takes the smallest tuned head dim that holds D, tensor-core tiles for f16/bf16 and lanes for f32 and for rows past 256', () => {
    expect(attentionLaunch('bf16', 128)).toEqual({ launch: 'tiles128', kernel: 'paged_attention_bf16_d128' });
    expect(attentionLaunch('f16', 80)).toEqual({ launch: 'tiles128', kernel: 'paged_attention_f16_d128' });
    expect(attentionLaunch('bf16', 8)).toEqual({ launch: 'tiles64', kernel: 'paged_attention_bf16_d64' });
    expect(attentionLaunch('f32', 256)).toEqual({ launch: 'lanes256', kernel: 'paged_attention_f32_d256' });
    expect(attentionLaunch('f32', 129)).toEqual({ launch: 'lanes256', kernel: 'paged_attention_f32_d256' });
    expect(attentionLaunch('bf16', 576)).toEqual({ launch: 'lanes576', kernel: 'paged_attention_bf16_d576' });
    expect(attentionLaunch('f16', 257)).toEqual({ launch: 'lanes576', kernel: 'paged_attention_f16_d576' });
    expect(attentionLaunch('f32', 576)).toEqual({ launch: 'lanes576', kernel: 'paged_attention_f32_d576' });
  });

  it('gives decode and short verification the decode launch, beside the tiles where some request may have more rows', () => {
    const names = (c: ReturnType<typeof chooseLaunches>) => c.launches.map((l) => l.kernel);
    const llama = { Hq: 32, H: 8, D: 128, S: 1 << 20 };
    // 64 decode requests, or two queries each (8 rows of a group of 4): decode alone, every request its own.
    expect(chooseLaunches('bf16', { ...llama, B: 64, N: 64 })).toEqual({ launches: [{ launch: 'decode128', kernel: 'paged_attention_bf16_decode128' }], decodeRows: Number.MAX_SAFE_INTEGER });
    expect(names(chooseLaunches('f16', { ...llama, B: 64, N: 128 }))).toEqual(['paged_attention_f16_decode128']);
    // Verification of 8 queries, or a prefill chunk among decode requests: the tiles take the requests past DECODE_ROWS rows.
    expect(chooseLaunches('bf16', { ...llama, B: 64, N: 512 })).toEqual({ launches: [{ launch: 'tiles128', kernel: 'paged_attention_bf16_d128' }, { launch: 'decode128', kernel: 'paged_attention_bf16_decode128' }], decodeRows: DECODE_ROWS });
    expect(names(chooseLaunches('bf16', { ...llama, D: 64, B: 8, N: 7 + 512 }))).toEqual(['paged_attention_bf16_d64', 'paged_attention_bf16_decode64']);
    // One request of many rows, f32, D past 128, a group wider than DECODE_ROWS, pools of 2³¹ rows: no decode launch.
    for (const [dtype, d] of [
      ['bf16', { ...llama, B: 1, N: 100 }],
      ['f32', { ...llama, B: 64, N: 64 }],
      ['bf16', { ...llama, D: 256, B: 64, N: 64 }],
      ['bf16', { ...llama, H: 2, B: 64, N: 64 }],
      ['bf16', { ...llama, S: 2 ** 28, B: 64, N: 64 }],
    ] as const) {
      const chosen = chooseLaunches(dtype, d);
      expect(chosen.decodeRows, JSON.stringify(d)).toBe(0);
      expect(chosen.launches).toEqual([attentionLaunch(dtype, d.D)]);
    }
  });

  it('splits one long request over every multiprocessor of an H200, and leaves 64 requests of 4096 tokens whole', () => {
    const slots = H200.multiprocessors * 2;
    const shape = { H: 8, Hq: 32, D: 128, Dv: 128, rowsPerPass: 64, tileTokens: 64, slots };
    const long = planPagedAttention({ ...shape, B: 1, N: 1, C: 131072 });
    const blocks = Math.ceil(131072 / long.tokensPerSplit) * 8;
    expect(blocks).toBeGreaterThanOrEqual(0.9 * slots);
    expect(blocks).toBeLessThanOrEqual(slots);
    expect(long.tokensPerSplit % 64).toBe(0);
    expect(long.partialRows).toBeGreaterThan(0);
    const decode = planPagedAttention({ ...shape, B: 64, N: 64, C: 64 * 4096 });
    expect(decode.partialRows).toBe(0);
    expect(decode.passSlots).toBe(1);
    // Verification: 8 queries of 4 heads a request are 32 rows, one pass.
    expect(planPagedAttention({ ...shape, B: 64, N: 512, C: 64 * 4096 }).passSlots).toBe(1);
  });

  it('covers every token of every request once per row pass, within the grid and the partial rows', async () => {
    await forEverySeed(60, ({ seed, numRuns }) =>
      fc.assert(
        fc.property(calls, (c) => {
          const qIndptr = [0];
          const kvIndptr = [0];
          // qLen <= kvLen, as the contract keeps it.
          for (const [q, kv] of c.lengths) {
            qIndptr.push(qIndptr.at(-1)! + Math.min(q, kv));
            kvIndptr.push(kvIndptr.at(-1)! + kv);
          }
          const B = c.lengths.length;
          const N = qIndptr.at(-1)!;
          const C = kvIndptr.at(-1)!;
          const { launch } = attentionLaunch(c.dtype, c.D);
          const l = LAUNCHES.pagedAttention[launch];
          const shape: PagedShape = { B, N, C, H: c.H, Hq: c.H * c.group, D: c.D, Dv: c.D > 256 ? 512 : c.D, rowsPerPass: l.rowsPerPass, tileTokens: 'tileTokens' in l ? l.tileTokens : 64, slots: c.slots };
          const plan = planPagedAttention(shape);
          expect(plan.tokensPerSplit).toBeGreaterThanOrEqual(1);
          expect(plan.partialRows * (shape.Dv + 1) * 4).toBeLessThanOrEqual(pagedTuning.maxPartialBytes);
          const rowsOf = (b: number) => (qIndptr[b + 1]! - qIndptr[b]!) * c.group;
          // seen[b][pass]: the token ranges the blocks of that pass of request b read.
          const seen = new Map<string, [number, number][]>();
          for (let piece = 0; piece < plan.pieces; piece++) {
            for (let slot = 0; slot < plan.passSlots; slot++) {
              const w = findWork(plan, qIndptr, kvIndptr, piece, slot, rowsOf, l.rowsPerPass);
              if (!w) continue;
              if (w.split) {
                expect(plan.partialRows).toBeGreaterThan(0);
                // Partial row (piece, i, hq) inside [pieces, splitQueries, Hq].
                expect((w.piece * plan.splitQueries + (qIndptr[w.request + 1]! - qIndptr[w.request]! - 1)) * shape.Hq + shape.Hq - 1).toBeLessThan(plan.partialRows);
              }
              for (const pass of w.passes) {
                const key = `${w.request} ${pass}`;
                seen.set(key, [...(seen.get(key) ?? []), [w.j0, w.j1]]);
              }
            }
          }
          for (let b = 0; b < B; b++) {
            const kvLen = kvIndptr[b + 1]! - kvIndptr[b]!;
            const passes = Math.ceil(rowsOf(b) / l.rowsPerPass);
            for (let pass = 0; pass < passes; pass++) {
              const ranges = (seen.get(`${b} ${pass}`) ?? []).sort((x, y) => x[0] - y[0]);
              let next = 0;
              for (const [j0, j1] of ranges) {
                expect(j0, `request ${b} pass ${pass}`).toBe(next);
                expect(j1).toBeGreaterThan(j0);
                next = j1;
              }
              expect(next, `request ${b} pass ${pass}`).toBe(kvLen);
            }
          }
        }),
        { seed, numRuns },
      ),
    );
  });
});
