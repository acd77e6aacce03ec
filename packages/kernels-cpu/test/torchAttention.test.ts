/**
 * pagedAttention against implementations nobody here wrote: PyTorch's scaled_dot_product_attention (GQA and MQA,
 * causal from each request's offset, a sliding window) and one Qwen3 layer's eager attention from Hugging Face
 * transformers (its q_norm, k_norm and RoPE applied first), run by fixtures/torch-attention.py on the GPU host; the
 * literal numbers it printed are in fixtures/torch-attention.json. kvkit reads the K/V rows through shuffled pool
 * slots, so the literals also check the paged read. The GPU backends are held to this reference by conformance.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { createCpuBackend } from '../src/index.js';

interface AttentionCase {
  readonly name: string;
  readonly numQoHeads: number;
  readonly numKvHeads: number;
  readonly headDim: number;
  /** [qLen, kvLen] per request. */
  readonly requests: readonly (readonly [number, number])[];
  readonly slidingWindow: number;
  readonly scale: number;
  readonly qF32Bits: readonly number[];
  readonly kF32Bits: readonly number[];
  readonly vF32Bits: readonly number[];
  readonly outF32Bits: readonly number[];
  readonly lseF32Bits?: readonly number[];
}

// Printed by `python3 fixtures/torch-attention.py > fixtures/torch-attention.json` where torch and transformers 5.x are installed.
const fixture = JSON.parse(readFileSync(new URL('./fixtures/torch-attention.json', import.meta.url), 'utf8')) as { source: string; cases: AttentionCase[] };

const f32 = (bits: readonly number[]) => new Float32Array(Uint32Array.from(bits).buffer);
/** Prefix sums of the lengths: `[0, n0, n0 + n1, ...]`. */
function offsets(lengths: readonly number[]): number[] {
  const out = [0];
  for (const n of lengths) out.push(out.at(-1)! + n);
  return out;
}

/** ‖got − want‖ / ‖want‖ over the rows of `want` from `from` on. */
function relativeError(got: Float32Array, want: Float32Array, from = 0): number {
  let diff = 0;
  let norm = 0;
  for (let i = 0; i < got.length; i++) {
    const w = want[from + i]!;
    diff += (got[i]! - w) ** 2;
    norm += w * w;
  }
  return Math.sqrt(diff / norm);
}

describe('pagedAttention against PyTorch SDPA and Qwen3 eager attention', () => {
  const { cases } = fixture;

  /** One call over the case's requests, or the last `lastQueries` queries of its only request; K/V rows at slots in reverse order. */
  const run = async (c: AttentionCase, lastQueries?: number) => {
    const b = createCpuBackend();
    const { numQoHeads: Hq, numKvHeads: H, headDim: D } = c;
    const requests = lastQueries === undefined ? c.requests : [[lastQueries, c.requests[0]![1]] as const];
    const N = requests.reduce((n, [q]) => n + q, 0);
    const C = requests.reduce((n, [, kv]) => n + kv, 0);
    const allQ = f32(c.qF32Bits);
    const q = lastQueries === undefined ? allQ : allQ.subarray(allQ.length - N * Hq * D);
    const k = f32(c.kF32Bits);
    const v = f32(c.vF32Bits);
    // Token t of the call at slot C - 1 - t.
    const kPool = new Float32Array(C * H * D);
    const vPool = new Float32Array(C * H * D);
    for (let t = 0; t < C; t++) {
      kPool.set(k.subarray(t * H * D, (t + 1) * H * D), (C - 1 - t) * H * D);
      vPool.set(v.subarray(t * H * D, (t + 1) * H * D), (C - 1 - t) * H * D);
    }
    const { out, lse } = b.pagedAttention({
      q: b.tensor('f32', [N, Hq, D], q),
      kPool: b.tensor('f32', [C, H, D], kPool),
      vPool: b.tensor('f32', [C, H, D], vPool),
      qIndptr: b.tensor('i32', [requests.length + 1], offsets(requests.map(([n]) => n))),
      kvIndptr: b.tensor('i32', [requests.length + 1], offsets(requests.map(([, kv]) => kv))),
      kvSlots: b.tensor('i32', [C], Array.from({ length: C }, (_, t) => C - 1 - t)),
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      scale: c.scale,
      ...(c.slidingWindow ? { slidingWindow: c.slidingWindow } : {}),
    });
    const result = { out: (await b.read(out)) as Float32Array, lse: (await b.read(lse)) as Float32Array };
    b.dispose();
    return result;
  };

  it('names the versions it was printed with', () => {
    expect(fixture.source).toMatch(/^PyTorch \d+\.\d+.* transformers 5\./);
  });

  it.each(cases.map((c) => [c.name, c] as const))('%s: out within 1e-5 (relative L2), lse within 1e-5', async (_name, c) => {
    const { out, lse } = await run(c);
    const want = f32(c.outF32Bits);
    expect(out.length).toBe(want.length);
    expect(relativeError(out, want)).toBeLessThanOrEqual(1e-5);
    if (c.lseF32Bits) {
      const wantLse = f32(c.lseF32Bits);
      for (let i = 0; i < wantLse.length; i++) expect(Math.abs(lse[i]! - wantLse[i]!), `lse row ${i}`).toBeLessThanOrEqual(1e-5);
    }
  });

  it("Qwen3's last 4 queries, verified over all 12 cached tokens, are the layer's last 4 rows", async () => {
    const c = cases.find((x) => x.name.startsWith('Qwen3Attention'))!;
    const { out } = await run(c, 4);
    const want = f32(c.outF32Bits);
    expect(relativeError(out, want, want.length - out.length)).toBeLessThanOrEqual(1e-5);
  });
});
