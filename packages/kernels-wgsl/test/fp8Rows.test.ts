import { randomValues, Rng } from '@kvkit/conformance';
import { decodeFp8, encodeFp8 } from '@kvkit/contracts/backend';
import type { Backend, Fp8DType, Tensor } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { minifyWgslPiece } from '../scripts/wgslMinify.js';
import { createWebGpuBackend } from '../src/index.js';
import { findAdapter, KERNEL_TOGGLES } from '../src/runtime/adapter.js';
import { FP8_WGSL, fp8Decode, fp8ValueWgsl } from '../src/shaders/fp8.wgsl.js';
import { storeRowVectors } from '../src/shaders/kvPoolRows.wgsl.js';
import type { Fp8ExactPath } from '../src/shaders/kvPoolRows.wgsl.js';
import { rowLayout, tuning } from '../src/shaders/plan.js';
import { onDefaultLimits } from './defaultLimits.js';
import { runWordKernel } from './wordKernel.js';

/**
 * The row kernels' fp8 codes (kvPoolRows.wgsl.ts storeRowVectors: the fast
 * product, and the exact division where it is too close to call, in each of
 * tuning.fp8Exact's places) against the host codec at every rounding
 * boundary, with the product forced as far off as WGSL allows; the
 * dequantizer's fp8 decoding against bitsOfFp8; and ropePoolFused into fp8
 * pools with K and V rows on and around rounding ties, bytes identical to
 * the CPU reference for every setting of tuning.fp8Exact and fp8KvLanes.
 */
const probe = await findAdapter({}, KERNEL_TOGGLES);
const device = probe.ok ? await probe.adapter.requestDevice() : undefined;
afterAll(() => device?.destroy());
const withDevice = describe.skipIf(!probe.ok);
const TIMEOUT_MS = 300_000;
const PATHS: readonly Fp8ExactPath[] = ['element', 'word', 'row'];

/** Runs `body` for i < `count`, after `prelude` (wordKernel.ts). */
async function onDevice(body: string, input: Uint32Array, count: number, prelude: string): Promise<Uint32Array> {
  if (!device) throw new Error('no adapter');
  return runWordKernel(device, { body, input, count, prelude });
}

const f32 = (bits: number) => new Float32Array(new Uint32Array([bits]).buffer)[0]!;
const f32Bits = (x: number) => new Uint32Array(Float32Array.of(x).buffer)[0]!;

function xorshift(seed: number): () => number {
  let state = seed;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return state >>> 0;
  };
}

/** Records of 8 x and 2 scales (f32 bits): x on, and a few units either side of, a rounding boundary of `dtype` over the record's scales, of many binades; then random records, and records of scales the fast path does not take. */
function boundaryRecords(dtype: Fp8DType): Uint32Array {
  const words: number[] = [];
  const next = xorshift(0x7a3c91e5);
  const max = dtype === 'fp8e4m3' ? 0x7e : 0x7b;
  const midpoints = Array.from({ length: max + 1 }, (_, c) => (c < max ? (decodeFp8(dtype, c) + decodeFp8(dtype, c + 1)) / 2 : 1.5 * decodeFp8(dtype, max)));
  for (let r = 0; r < 3000; r++) {
    const scales = [0, 1].map(() => ((((next() % 200) + 27) << 23) | (next() & 0x7fffff)) >>> 0);
    for (let e = 0; e < 8; e++) {
      const s = scales[e >> 2]!;
      const m = midpoints[next() % midpoints.length]!;
      const x = (f32Bits(Math.fround(m * f32(s))) + (next() % 9) - 4) >>> 0;
      words.push(next() % 2 ? (x | 0x80000000) >>> 0 : x);
    }
    words.push(...scales);
  }
  for (let r = 0; r < 2000; r++) {
    for (let e = 0; e < 8; e++) words.push(next() % 16 === 0 ? next() & 0x807fffff : next() & 0xbfffffff);
    words.push((next() & 0x3fffffff) | 0x00800000, [0x00400000, 0x0d7fffff, 0x7f000000, 0x3f800000][r % 4]!);
  }
  return Uint32Array.from(words);
}

/** The host's code of x / s, f32 bits both: the quotient rounded once to f32, then to fp8 (quantizeToFp8). */
function hostCode(dtype: Fp8DType, x: number, s: number): number {
  return encodeFp8(dtype, Math.fround(f32(x) / f32(s)));
}

/** WGSL statements: record i's 8 codes by storeRowVectors over `path` (two stores of four f32 values, one scale each) into output[2i], output[2i + 1]. */
function recordBody(dtype: Fp8DType, path: Fp8ExactPath): string {
  const layout = rowLayout('f32', 4);
  const x = (e: number) => `input[10u * (i / 2u) + ${e}u]`;
  const store = storeRowVectors(
    dtype,
    'f32',
    layout,
    [
      { target: 'output[2u * (i / 2u)]', vector: `vec4<u32>(${[0, 1, 2, 3].map(x).join(', ')})`, scale: 'sa' },
      { target: 'output[2u * (i / 2u) + 1u]', vector: `vec4<u32>(${[4, 5, 6, 7].map(x).join(', ')})`, scale: 'sb' },
    ],
    path,
  );
  return `if (i % 2u == 0u) { let sa = input[10u * (i / 2u) + 8u]; let sb = input[10u * (i / 2u) + 9u]; ${store} }`;
}

async function recordMismatches(dtype: Fp8DType, path: Fp8ExactPath, records: Uint32Array, prelude: string): Promise<string[]> {
  const count = (records.length / 10) * 2;
  const got = await onDevice(recordBody(dtype, path), records, count, prelude);
  const bad: string[] = [];
  for (let r = 0; r < records.length / 10; r++) {
    for (let e = 0; e < 8; e++) {
      const x = records[10 * r + e]!;
      const s = records[10 * r + 8 + (e >> 2)]!;
      const code = (got[2 * r + (e >> 2)]! >>> (8 * (e & 3))) & 0xff;
      const want = hostCode(dtype, x, s);
      if (code !== want) bad.push(`${path}: 0x${x.toString(16)} / 0x${s.toString(16)} = 0x${code.toString(16)}, want 0x${want.toString(16)}`);
    }
  }
  return bad;
}

withDevice(`fp8 codes of the row kernels and the dequantizer's decoding${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  it('fp8Value decodes every code to the bits bitsOfFp8 gives', async () => {
    for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
      const codes = Uint32Array.from({ length: 256 }, (_, c) => c);
      const got = await onDevice(`output[i] = select(0u, 1u, fp8Value(input[i]) != ${fp8Decode(dtype, 'input[i]')});`, codes, 256, `${FP8_WGSL}\n${fp8ValueWgsl(dtype)}`);
      expect([...got.entries()].filter(([, x]) => x !== 0).map(([c]) => c), dtype).toEqual([]);
    }
  });

  it(
    "codes of x / s as the host gives them at every rounding boundary, in each exact path; with the product 7 units off too, and wrong without the slack",
    async () => {
      // x times 1/s may be 3 * 2^-23 off relatively in WGSL: 7 units of the quotient's bits where the exact one is a binade lower.
      const product = minifyWgslPiece('bitcast<vec4<f32>>(ax) * k.inverse')!;
      const slack = minifyWgslPiece('const QUOTIENT_SLACK = 8u;')!;
      expect(FP8_WGSL).toContain(product);
      expect(FP8_WGSL).toContain(slack);
      for (const dtype of ['fp8e4m3', 'fp8e5m2'] as const) {
        const records = boundaryRecords(dtype);
        for (const path of PATHS) expect((await recordMismatches(dtype, path, records, FP8_WGSL)).slice(0, 5), dtype).toEqual([]);
        // A zero product (x an f32 subnormal, flushed) is exact: it is not stepped below zero.
        for (const forcedProduct of [`bitcast<vec4<u32>>(${product}) + vec4(7u)`, `max(bitcast<vec4<u32>>(${product}), vec4(7u)) - vec4(7u)`]) {
          const off = forcedProduct.endsWith('+ vec4(7u)') ? '+ 7' : '- 7';
          const forced = FP8_WGSL.replace(product, `bitcast<vec4<f32>>(${forcedProduct})`);
          expect((await recordMismatches(dtype, 'row', records, forced)).slice(0, 5), `${dtype}, product ${off}`).toEqual([]);
          expect((await recordMismatches(dtype, 'row', records, forced.replace(slack, 'const QUOTIENT_SLACK = 0u;'))).length, `${dtype}, product ${off}, no slack`).toBeGreaterThan(0);
        }
      }
    },
    TIMEOUT_MS,
  );
});

/** Rows [N, heads, D] of `dtype` on and around the ties of x / scale[h] (scales of one and several binades off a power of two). */
function tieRows(dtype: 'bf16' | 'f32', fp8: Fp8DType, N: number, heads: number, D: number, scales: readonly number[], seed: number): Float32Array {
  const next = xorshift(seed);
  const max = fp8 === 'fp8e4m3' ? 0x7e : 0x7b;
  const out = new Float32Array(N * heads * D);
  for (let i = 0; i < out.length; i++) {
    const h = Math.floor(i / D) % heads;
    const code = next() % max;
    const tie = ((decodeFp8(fp8, code) + decodeFp8(fp8, code + 1)) / 2) * scales[h]!;
    // bf16 rows: the tie of the nearest power of two (exact in bf16); f32 ties are stepped a unit or two either way.
    const x = dtype === 'f32' ? f32(f32Bits(Math.fround(tie)) + (next() % 5) - 2) : Math.fround(((decodeFp8(fp8, code) + decodeFp8(fp8, code + 1)) / 2) * 2 ** Math.round(Math.log2(scales[h]!)));
    out[i] = next() % 2 ? -x : x;
  }
  return out;
}

withDevice(`ropePoolFused into fp8 pools, K and V on rounding ties, in every setting of the fp8 knobs${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  let cpu: Backend;
  const saved = { ...tuning };
  beforeAll(() => {
    cpu = createCpuBackend();
  });
  afterAll(() => {
    Object.assign(tuning, saved);
    cpu?.dispose();
  });

  /** The pools' bytes after one call (positions 0, so K rotates to itself), with and without a Q/K-norm (V then goes through the norm kernel's store). */
  const poolsAfter = async (b: Backend, model: 'bf16' | 'f32', fp8: Fp8DType, layout: 'NHD' | 'HND', qkNorm: boolean, D: number): Promise<Uint8Array[]> => {
    const [N, H, Hq, pageSize] = [6, 3, 6, 4];
    const S = 8;
    // bf16 rows hold ties of powers of two exactly; scales a few units off one put the quotients a few units off the tie.
    const scales = model === 'bf16' ? [0.25 * (1 + 2 ** -21), 2 ** -9, 8 * (1 - 2 ** -22)] : [0.3, 1.7e-3, 41];
    const rng = new Rng(99);
    const poolShape = layout === 'NHD' ? [S, H, D] : [S / pageSize, H, pageSize, D];
    const args = {
      q: b.tensor(model, [N, Hq, D], randomValues(rng, N * Hq * D)),
      k: b.tensor(model, [N, H, D], tieRows(model, fp8, N, H, D, scales, 5)),
      v: b.tensor(model, [N, H, D], tieRows(model, fp8, N, H, D, scales, 7)),
      positions: b.tensor('i32', [N], new Int32Array(N)),
      slots: b.tensor('i32', [N], Int32Array.from([3, 0, -1, 6, 1, 7])),
      kPool: b.tensor(fp8, poolShape, new Float32Array(S * H * D)),
      vPool: b.tensor(fp8, poolShape, new Float32Array(S * H * D)),
      kScale: b.tensor('f32', [H], Float32Array.from(scales)),
      vScale: b.tensor('f32', [H], Float32Array.from(scales)),
      ...(layout === 'HND' ? { layout } : {}),
      ...(qkNorm ? { qNormWeight: b.tensor('f32', [D], new Float32Array(D).fill(1)), kNormWeight: b.tensor('f32', [D], new Float32Array(D).fill(1)), eps: 1e-6 } : {}),
      numQoHeads: Hq,
      numKvHeads: H,
      headDim: D,
      ropeBase: 10000,
    };
    (b as unknown as { ropePoolFused(a: unknown): unknown }).ropePoolFused(args);
    return Promise.all([args.kPool, args.vPool].map(async (t) => new Uint8Array(((await b.readBits(t as Tensor<'fp8e4m3'>)) as Uint8Array).slice())));
  };

  const compare = async (gpu: Backend, label: string) => {
    const bad: string[] = [];
    // bf16 D = 16: pairs of one vector each; D = 24: rows of three vectors, partners by element. f32 D = 24: pairs of three.
    const cases = [
      ['bf16', 'fp8e4m3', 'NHD', false, 16],
      ['bf16', 'fp8e5m2', 'HND', true, 16],
      ['bf16', 'fp8e4m3', 'HND', false, 24],
      ['f32', 'fp8e4m3', 'HND', false, 24],
      ['f32', 'fp8e5m2', 'NHD', false, 16],
      ['f32', 'fp8e4m3', 'NHD', true, 24],
    ] as const;
    for (const [model, fp8, layout, qkNorm, D] of cases) {
      const [got, want] = [await poolsAfter(gpu, model, fp8, layout, qkNorm, D), await poolsAfter(cpu, model, fp8, layout, qkNorm, D)];
      got.forEach((g, p) => {
        const at = g.findIndex((x, i) => x !== want[p]![i]);
        if (at >= 0) bad.push(`${label}, ${model} into ${layout} ${fp8} D=${D}${qkNorm ? ', Q/K-norm' : ''}: ${p ? 'v' : 'k'}Pool byte ${at} is 0x${g[at]!.toString(16)}, want 0x${want[p]![at]!.toString(16)}`);
      });
    }
    expect(bad.slice(0, 6)).toEqual([]);
  };

  it(
    'fp8Exact element, word and row; fp8KvLanes pair and split; one dispatch and (the default 8 bindings) the parts apart',
    async () => {
      try {
        for (const lanes of ['pair', 'split'] as const) {
          for (const path of PATHS) {
            Object.assign(tuning, { fp8Exact: path, fp8KvLanes: lanes });
            const gpu = await createWebGpuBackend();
            try {
              await compare(gpu, `${path}, ${lanes}`);
            } finally {
              gpu.dispose();
            }
            if (path === 'row') await onDefaultLimits((small) => compare(small, `${path}, ${lanes}, 8 bindings`));
          }
        }
      } finally {
        Object.assign(tuning, saved);
      }
    },
    TIMEOUT_MS,
  );
});
