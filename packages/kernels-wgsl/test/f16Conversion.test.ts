import { buildCosSinCache, randomPositive, randomValues, Rng } from '@kvkit/conformance';
import type { Backend, Tensor } from '@kvkit/contracts';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';

/**
 * The f16 builtins (unpack2x16float, pack2x16float behind its range guard)
 * and the integer code, each forced, give the same bits through the row
 * kernels: on a tensor holding every f16 code, NaN and infinity included,
 * and on random data, into f16 pools and into fp8 ones. SwiftShader's pack2x16float misrounds some f16
 * subnormals (numerics.test.ts finds them, and its probe keeps integer
 * encoding there); these rows meet none of them.
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: f16 conversion tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const skipNote = probe.ok ? '' : ' (skipped: no WebGPU adapter)';
const TIMEOUT_MS = 120_000;
/** Rows per page of the fp8 HND pools. */
const PAGE_SIZE = 8;

let builtin: Backend;
let integer: Backend;
let probed: Backend;
beforeAll(async () => {
  if (!probe.ok) return;
  builtin = await createWebGpuBackend({ f16Conversion: 'builtin' });
  integer = await createWebGpuBackend({ f16Conversion: 'integer' });
  probed = await createWebGpuBackend();
});
afterAll(() => {
  for (const b of [builtin, integer, probed]) b?.dispose();
});

/**
 * Every f16 code once: the finite ones first, in an order that mixes magnitudes
 * within a head row (an odd multiplier permutes the codes), then infinities and
 * NaNs (which make their rows NaN), so most rows stay finite.
 */
function everyCode(multiplier: number): Uint16Array {
  const codes = Array.from({ length: 65536 }, (_, i) => Math.imul(i, multiplier) & 0xffff);
  const finite = (h: number) => (h & 0x7c00) !== 0x7c00;
  return Uint16Array.from([...codes.filter(finite), ...codes.filter((h) => !finite(h))]);
}

/** Random values over many binades of f16, both signs, never zero. */
function randomWide(rng: Rng, n: number): Float32Array {
  return Float32Array.from(randomValues(rng, n), (x) => x * 2 ** (rng.int(24) - 12));
}

/** An f16 tensor of these codes, or of these values (rounded by the host codec, the same bits on both backends). */
function f16Tensor(b: Backend, shape: number[], data: Uint16Array | Float32Array): Tensor {
  return data instanceof Uint16Array ? b.tensorFromBits('f16', shape, data) : b.tensor('f16', shape, data);
}

/** Stored bits as readBits gives them: f16 patterns, or fp8 codes. */
type Bits = Uint16Array | Uint8Array;

/** Runs `call` on both backends from the same input bits and expects the same output bits; returns the builtin backend's, for sanity checks. */
async function sameOnBoth(what: string, call: (b: Backend, made: Tensor[]) => Record<string, Tensor>): Promise<Record<string, Bits>> {
  const results: Record<string, Bits>[] = [];
  for (const b of [builtin, integer]) {
    const made: Tensor[] = [];
    try {
      const outs = call(b, made);
      await b.sync();
      const read: Record<string, Bits> = {};
      for (const [name, t] of Object.entries(outs)) read[name] = (await b.readBits(t)) as Bits;
      results.push(read);
    } finally {
      for (const t of made) t.dispose();
    }
  }
  const [a, c] = results as [Record<string, Bits>, Record<string, Bits>];
  for (const name of Object.keys(a)) {
    const mismatches: string[] = [];
    a[name]!.forEach((bits, i) => {
      if (bits !== c[name]![i] && mismatches.length < 5) mismatches.push(`[${i}] 0x${bits.toString(16)} vs 0x${c[name]![i]!.toString(16)}`);
    });
    expect(mismatches, `${what}: ${name}, builtin vs integer`).toEqual([]);
  }
  return a;
}

/** More than half the codes of `bits` are distinct values: a kernel that wrote nothing (or one value) cannot pass. */
function expectVaried(what: string, bits: Bits): void {
  const codes = bits instanceof Uint8Array ? 256 : 65536;
  expect(new Set(bits).size, what).toBeGreaterThan(Math.min(bits.length, codes) / 4);
}

type Fused = { T: number; L: number; H: number; D: number; R: number; style: 'neox' | 'gptj' };

function fused(kv: Uint16Array | Float32Array, s: Fused, seed: number) {
  return (b: Backend, made: Tensor[]) => {
    const rng = new Rng(seed);
    const keep = <X extends Tensor>(t: X) => {
      made.push(t);
      return t;
    };
    const P = s.T + 5;
    const out = b.fusedNormRopeStacked({
      kv: keep(f16Tensor(b, [s.T, s.L, 2 * s.H * s.D], kv)),
      kNormWeight: keep(b.tensor('f16', [s.L, s.D], randomPositive(rng, s.L * s.D))),
      eps: keep(b.tensor('f32', [s.L], new Float32Array(s.L).fill(1e-6))),
      cosSinCache: keep(b.tensor('f16', [P, s.R], buildCosSinCache(P, s.R, 10000))),
      positions: keep(b.tensor('i32', [s.T], Int32Array.from({ length: s.T }, () => rng.int(P)))),
      numKvHeads: s.H,
      headDim: s.D,
      rotaryDim: s.R,
      ropeStyle: s.style,
    });
    keep(out.kOut);
    keep(out.vOut);
    return { kOut: out.kOut, vOut: out.vOut };
  };
}

type Pool = { N: number; Hq: number; H: number; D: number; R: number; style: 'neox' | 'gptj'; qkNorm: boolean };

/** ropePoolFused of these q, k, v into f16 NHD pools, or (`fp8`) into fp8e4m3 HND pools of pages of 8 with per-head scales. */
function ropePool(q: Uint16Array | Float32Array, k: Uint16Array | Float32Array, v: Uint16Array | Float32Array, s: Pool, seed: number, fp8 = false) {
  return (b: Backend, made: Tensor[]): Record<string, Tensor> => {
    const rng = new Rng(seed);
    const keep = <X extends Tensor>(t: X) => {
      made.push(t);
      return t;
    };
    const S = fp8 ? PAGE_SIZE * Math.ceil((s.N + 3) / PAGE_SIZE) : s.N + 3;
    // A permutation of slots, one token skipped (-1) and one contesting another's slot.
    const slots = Int32Array.from(rng.shuffle(Array.from({ length: S }, (_, i) => i)).slice(0, s.N));
    slots[1] = -1;
    if (s.N > 4) slots[3] = slots[4]!;
    const poolShape = fp8 ? [S / PAGE_SIZE, s.H, PAGE_SIZE, s.D] : [S, s.H, s.D];
    const kPool = keep(b.tensor(fp8 ? 'fp8e4m3' : 'f16', poolShape, randomValues(rng, S * s.H * s.D)));
    const vPool = keep(b.tensor(fp8 ? 'fp8e4m3' : 'f16', poolShape, randomValues(rng, S * s.H * s.D)));
    const pools = fp8
      ? { layout: 'HND' as const, kScale: keep(b.tensor('f32', [s.H], randomPositive(rng, s.H, 0.25, 2))), vScale: keep(b.tensor('f32', [s.H], randomPositive(rng, s.H, 0.25, 2))) }
      : {};
    const norm = s.qkNorm ? { qNormWeight: keep(b.tensor('f16', [s.D], randomPositive(rng, s.D))), kNormWeight: keep(b.tensor('f16', [s.D], randomPositive(rng, s.D))), eps: 1e-6 } : {};
    const out = b.ropePoolFused({
      q: keep(f16Tensor(b, [s.N, s.Hq, s.D], q)),
      k: keep(f16Tensor(b, [s.N, s.H, s.D], k)),
      v: keep(f16Tensor(b, [s.N, s.H, s.D], v)),
      positions: keep(b.tensor('i32', [s.N], Int32Array.from({ length: s.N }, () => rng.int(1 << 20)))),
      slots: keep(b.tensor('i32', [s.N], slots)),
      kPool,
      vPool,
      ...pools,
      numQoHeads: s.Hq,
      numKvHeads: s.H,
      headDim: s.D,
      rotaryDim: s.R,
      ropeStyle: s.style,
      ropeBase: 10000,
      ...norm,
    });
    keep(out.qRot);
    keep(out.kRot);
    // fp8: the pools alone (qRot and kRot are encoded to f16, which the cases above compare; SwiftShader's pack2x16float misrounds a few of these subnormals).
    return fp8 ? { kPool, vPool } : { qRot: out.qRot, kRot: out.kRot, kPool, vPool };
  };
}

withDevice(`f16 through the builtins and through integer code: the same bits${skipNote}`, () => {
  it('the option forces the conversion; without it, the probe chooses', () => {
    expect(webGpuBackendStats(builtin).f16Conversion).toEqual({ decode: 'builtin', encode: 'builtin' });
    expect(webGpuBackendStats(integer).f16Conversion).toEqual({ decode: 'integer', encode: 'integer' });
    console.log(`kernels-wgsl: the f16 probe chose ${JSON.stringify(webGpuBackendStats(probed).f16Conversion)} on ${probe.ok ? probe.description : ''}`);
  });

  it(
    'fusedNormRopeStacked on every f16 code (NeoX, full rotary) and on random data (GPT-J, partial rotary, D = 72 and odd D = 9)',
    async () => {
      const shape: Fused = { T: 64, L: 2, H: 2, D: 128, R: 128, style: 'neox' };
      const all = await sameOnBoth('every code', fused(everyCode(40503), shape, 1));
      expectVaried('kOut of every code', all.kOut!);
      // V is copied bit for bit, so it holds every code again.
      expect(new Set(all.vOut).size).toBe(32768);
      for (const [i, s] of ([{ T: 37, L: 3, H: 3, D: 72, R: 32, style: 'gptj' }, { T: 21, L: 2, H: 3, D: 9, R: 8, style: 'neox' }] as Fused[]).entries()) {
        const random = await sameOnBoth(`random, D = ${s.D}`, fused(randomWide(new Rng(10 + i), s.T * s.L * 2 * s.H * s.D), s, 2 + i));
        expectVaried(`kOut of random data, D = ${s.D}`, random.kOut!);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'ropePoolFused on every f16 code (NeoX pairs, with and without the Q/K-norm) and on random data (GPT-J, partial rotary, odd D)',
    async () => {
      for (const qkNorm of [false, true]) {
        const shape: Pool = { N: 64, Hq: 8, H: 8, D: 128, R: 128, style: 'neox', qkNorm };
        const all = await sameOnBoth(`every code, Q/K-norm ${qkNorm}`, ropePool(everyCode(40503), everyCode(52333), everyCode(11), shape, 3));
        expectVaried('qRot of every code', all.qRot!);
        expectVaried('kPool of every code', all.kPool!);
      }
      for (const [i, s] of ([
        { N: 29, Hq: 6, H: 3, D: 72, R: 48, style: 'gptj', qkNorm: false },
        { N: 29, Hq: 6, H: 3, D: 72, R: 32, style: 'neox', qkNorm: true },
        { N: 17, Hq: 4, H: 2, D: 9, R: 8, style: 'neox', qkNorm: true },
      ] as Pool[]).entries()) {
        const rng = new Rng(20 + i);
        const random = await sameOnBoth(
          `random, D = ${s.D}, Q/K-norm ${s.qkNorm}`,
          ropePool(randomWide(rng, s.N * s.Hq * s.D), randomWide(rng, s.N * s.H * s.D), randomWide(rng, s.N * s.H * s.D), s, 4 + i),
        );
        expectVaried(`qRot of random data, D = ${s.D}`, random.qRot!);
      }
    },
    TIMEOUT_MS,
  );

  it(
    'ropePoolFused from every f16 code into fp8e4m3 HND pools (the row kernels decode each word once), with and without the Q/K-norm',
    async () => {
      for (const qkNorm of [false, true]) {
        const shape: Pool = { N: 64, Hq: 8, H: 8, D: 128, R: 64, style: 'gptj', qkNorm };
        const all = await sameOnBoth(`fp8 pools, Q/K-norm ${qkNorm}`, ropePool(everyCode(40503), everyCode(52333), everyCode(11), shape, 9, true));
        expectVaried('kPool codes of every f16 code', all.kPool!);
        expectVaried('vPool codes of every f16 code', all.vPool!);
        // The NaN codes come last: written, they leave fp8 NaNs (0x7f, 0xff) in the pool, which the random start holds none of.
        expect(all.vPool!.some((c) => (c & 0x7f) === 0x7f), 'NaN codes in vPool').toBe(true);
      }
    },
    TIMEOUT_MS,
  );
});
