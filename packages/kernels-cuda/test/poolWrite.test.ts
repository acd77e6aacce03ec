/**
 * How the rope kernels write the pools, on the host side where no GPU is
 * needed: the pool fields the host puts in their parameter blocks, and the
 * device's pool-row addresses and fp8 packing (kv_pool.cuh, compiled by nvcc
 * as host code, which runs the software codec sm_80 runs) against the
 * contracts' rules (kvPoolLayout.ts poolRowStart, quantizeToFp8).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@kvkit/conformance';
import type { Fp8DType, PoolDType } from '@kvkit/contracts';
import { poolGeometry, poolRowStart, quantizeToFp8 } from '@kvkit/contracts/backend';
import type { PoolLayoutName } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { DENSE_ROWS, poolWrite } from '../src/ops/kvPools.js';
import { nvcc, packageRoot } from './helpers.js';

/** A host program from kv_pool.cuh, built once per test: `main` reads stdin lines and prints one answer per line. */
function runHostProgram(name: string, main: string, input: string): string[] {
  const dir = mkdtempSync(join(tmpdir(), `kvkit-${name}-`));
  const source = join(dir, `${name}.cu`);
  writeFileSync(source, `#include <cstdio>\n#include <cstdlib>\n#include "kv_pool.cuh"\n${main}\n`);
  const exe = join(dir, name);
  const built = spawnSync(nvcc!, ['-std=c++17', '-I', join(packageRoot, 'src', 'cuda'), source, '-o', exe], { encoding: 'utf8' });
  expect(built.status, built.stderr).toBe(0);
  const ran = spawnSync(exe, [], { input, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  expect(ran.status, ran.stderr).toBe(0);
  return ran.stdout.trimEnd().split('\n');
}

/** The device's codes of the fp8 formats (kv_pool.cuh PoolCode); every other pool holds the model dtype (0). */
const FP8_CODES: Partial<Record<PoolDType, number>> = { fp8e4m3: 1, fp8e5m2: 2 };

const f32Bits = (x: number) => new Uint32Array(new Float32Array([x]).buffer)[0]!;

describe('the pool fields of the rope kernels', () => {
  const scales = [
    { ptr: 0x7000_0100, perHead: true },
    { ptr: 0x7000_0200, perHead: false },
  ];

  it('leave NHD pools of the model dtype as dense rows', () => {
    for (const dtype of ['f32', 'f16', 'bf16'] as const) expect(poolWrite('NHD', { pageSize: 16 }, dtype, [undefined, undefined])).toEqual(DENSE_ROWS);
  });

  it('name the layout, the page size, the fp8 format and each scale with its own per-head flag', () => {
    const rng = new Rng(5);
    for (let trial = 0; trial < 40; trial++) {
      const layout: PoolLayoutName = rng.next() < 0.5 ? 'NHD' : 'HND';
      const dtype = (['f16', 'bf16', 'f32', 'fp8e4m3', 'fp8e5m2'] as const)[rng.int(5)]! as PoolDType;
      const pageSize = 1 + rng.int(300);
      const given = dtype.startsWith('fp8') ? rng.shuffle([...scales]) : [undefined, undefined];
      const w = poolWrite(layout, { pageSize }, dtype, given);
      expect(w.poolHeadMajor).toBe(layout === 'HND' ? 1 : 0);
      expect(w.poolPageSize).toBe(layout === 'HND' ? pageSize : 0);
      expect(w.poolDType).toBe(FP8_CODES[dtype] ?? 0);
      expect([w.kScale, w.vScale]).toEqual(given.map((s) => s?.ptr ?? 0));
      expect([w.kScalePerHead, w.vScalePerHead]).toEqual(given.map((s) => (s?.perHead ? 1 : 0)));
    }
  });
});

describe.skipIf(!nvcc)(`the device's pool math, compiled by nvcc as host code${nvcc ? '' : ' (skipped: nvcc not found)'}`, () => {
  it('puts every (slot, head) row where the contracts do, in both layouts, slots past 2^32 included', () => {
    const rng = new Rng(21);
    const cases: { line: string; want: number }[] = [];
    for (let trial = 0; trial < 400; trial++) {
      const layout: PoolLayoutName = trial % 2 ? 'HND' : 'NHD';
      const H = 1 + rng.int(9);
      const D = 1 + rng.int(260);
      const pageSize = 1 + rng.int(trial % 5 === 0 ? 4 : 300);
      const pages = trial % 7 === 0 ? 2 ** 25 + rng.int(1000) : 1 + rng.int(50);
      const S = pages * pageSize;
      const g = poolGeometry(layout, { S, H, D, pageSize });
      for (let k = 0; k < 4; k++) {
        const slot = k === 0 ? S - 1 : k === 1 ? 0 : rng.int(S);
        const head = rng.int(H);
        cases.push({ line: `${layout === 'HND' ? 1 : 0} ${slot} ${head} ${H} ${D} ${layout === 'HND' ? pageSize : 0}`, want: poolRowStart(g, 0, slot, head) });
      }
    }
    expect(cases.some((c) => c.want > 2 ** 32)).toBe(true);
    const got = runHostProgram(
      'pool_rows',
      `int main() {
  long long m, slot, head, H, D, pageSize;
  while (std::scanf("%lld %lld %lld %lld %lld %lld", &m, &slot, &head, &H, &D, &pageSize) == 6) {
    const long long split = kvkit::poolSlotElement(m != 0, slot, H, D, pageSize) + head * kvkit::poolHeadStride(m != 0, D, pageSize);
    std::printf("%lld %lld\\n", kvkit::poolElement(m != 0, slot, head, H, D, pageSize), split);
  }
}`,
      cases.map((c) => c.line).join('\n'),
    );
    expect(got).toEqual(cases.map((c) => `${c.want} ${c.want}`));
  }, 120_000);

  it('packs four values as the codes of x / scale, value 0 in the low byte, as the contracts round them', () => {
    const rng = new Rng(8);
    const specials = [0, -0, Number.NaN, -Number.NaN, Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY, 448, 464, 480, -1e9, 57344, 61440, 2 ** -9, 2 ** -10, 3 * 2 ** -11, 2 ** -16, 2 ** -17, 1e-40];
    const cases: { line: string; want: number }[] = [];
    for (let trial = 0; trial < 3000; trial++) {
      const dtype: Fp8DType = trial % 2 ? 'fp8e4m3' : 'fp8e5m2';
      const scale = Math.fround(trial % 3 === 0 ? 1 : 2 ** (rng.int(16) - 8) * (0.5 + rng.next()));
      const values = Array.from({ length: 4 }, () => {
        const r = rng.next();
        if (r < 0.15) return specials[rng.int(specials.length)]!;
        // Midpoints of fp8 steps (times the scale) and values around them, then random magnitudes of every size.
        if (r < 0.5) return Math.fround(scale * (1 + rng.int(128) / 16 + (rng.int(3) - 1) * 2 ** -20) * 2 ** (rng.int(30) - 15));
        return Math.fround((rng.next() - 0.5) * 2 ** (rng.int(40) - 20));
      });
      const want = values.reduce((acc, x, i) => acc + quantizeToFp8(dtype, x, scale) * 2 ** (8 * i), 0);
      cases.push({ line: `${dtype === 'fp8e4m3' ? 1 : 0} ${f32Bits(scale)} ${values.map(f32Bits).join(' ')}`, want });
    }
    const got = runHostProgram(
      'pool_fp8',
      `#include <cstring>
int main() {
  unsigned e4m3, bits[5];
  while (std::scanf("%u %u %u %u %u %u", &e4m3, &bits[0], &bits[1], &bits[2], &bits[3], &bits[4]) == 6) {
    float f[5];
    std::memcpy(f, bits, sizeof f);
    std::printf("%u\\n", kvkit::fp8QuadOf(f + 1, f[0], e4m3 != 0));
  }
}`,
      cases.map((c) => c.line).join('\n'),
    );
    expect(got.map(Number)).toEqual(cases.map((c) => c.want));
  }, 120_000);
});
