/**
 * Strided views on the host side, where no GPU is needed: the gather's dims
 * and parameter blocks, the same blocks read back by the device index math
 * (strided.cuh, compiled by nvcc as host code), the row kernels' choice
 * between the vector path and the element path for views, and which views a
 * Q/K-norm copies first.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@kvkit/conformance';
import type { DType } from '@kvkit/contracts';
import { GATHER_MAX_RANK } from '@kvkit/contracts/kernels';
import { describe, expect, it } from 'vitest';
import { stagedRows } from '../src/ops/ropePoolFused.js';
import { planRows, rowStrides } from '../src/ops/rowTiles.js';
import { ELEMENT_BYTES } from '../src/runtime/cudaTensor.js';
import { mergedDims as gatherDims } from '@kvkit/contracts/backend';
import { gatherLaunches } from '../src/runtime/gatherStrided.js';
import type { GatherSource } from '../src/runtime/gatherStrided.js';
import { ParamBlock } from '../src/runtime/params.js';
import { nvcc, packageRoot } from './helpers.js';
import { H200 } from './supportedGpus.js';

/** Storage offset of every element of a view, row-major, counted the plain way (an odometer over its index). */
function offsetsOf(shape: readonly number[], strides: readonly number[]): number[] {
  const n = shape.reduce((a, b) => a * b, 1);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    let rest = i;
    let at = 0;
    for (let d = shape.length - 1; d >= 0; d--) {
      at += (rest % shape[d]!) * strides[d]!;
      rest = Math.floor(rest / shape[d]!);
    }
    out.push(at);
  }
  return out;
}

/** A random view of at most 4096 elements: 1 to `maxRank` dims of 1..4, strides contiguous, padded, permuted, broadcast (0) or odd. */
function randomView(rng: Rng, maxRank: number): { shape: number[]; strides: number[] } {
  const rank = 1 + rng.int(maxRank);
  let shape = Array.from({ length: rank }, () => 1 + rng.int(4));
  while (shape.reduce((a, b) => a * b, 1) > 4096) shape = shape.map((s) => Math.max(1, s - 1));
  const strides = new Array<number>(rank);
  let step = 1 + rng.int(2);
  for (let d = rank - 1; d >= 0; d--) {
    const kind = rng.int(4);
    strides[d] = kind === 0 ? 0 : kind === 1 ? step + rng.int(3) : kind === 2 ? 1 + rng.int(40) : step;
    step = Math.max(step, strides[d]!) * shape[d]!;
  }
  return { shape, strides: rng.next() < 0.3 ? rng.shuffle(strides) : strides };
}

/** The launches' element offsets as the parameter blocks describe them, with each launch's src made relative to `base`. */
function launchOffsets(source: GatherSource, base: number): { dst: number; count: number; offsets: (i: number) => number }[] {
  const es = ELEMENT_BYTES[source.dtype];
  return gatherLaunches(source, 0).map((f) => {
    const fields = f as unknown as Record<string, number>;
    const sizes = Array.from({ length: f.rank }, (_, d) => fields[`size${d}`]!);
    const strides = Array.from({ length: f.rank }, (_, d) => fields[`stride${d}`]!);
    const local = offsetsOf(sizes, strides);
    return { dst: f.dst / es, count: f.count, offsets: (i: number) => (f.src - base) / es + local[i]! };
  });
}

describe('the strided gather, planned on the host', () => {
  it('collapses a view to dims that visit the same storage elements in the same order', () => {
    const rng = new Rng(41);
    for (let trial = 0; trial < 400; trial++) {
      const { shape, strides } = randomView(rng, 7);
      const dims = gatherDims(shape, strides);
      expect(offsetsOf(dims.sizes, dims.strides), `shape [${shape}] strides [${strides}]`).toEqual(offsetsOf(shape, strides));
      expect(dims.sizes.every((s) => s > 1) || dims.sizes.length === 0).toBe(true);
    }
    // A contiguous view is one dim; an offset does not enter the dims; a transposed one stays 2-D.
    expect(gatherDims([3, 5, 7], [35, 7, 1])).toEqual({ sizes: [105], strides: [1] });
    expect(gatherDims([4, 6], [1, 4])).toEqual({ sizes: [4, 6], strides: [1, 4] });
    expect(gatherDims([2, 0, 3], [9, 3, 1])).toEqual({ sizes: [0], strides: [1] });
  });

  it('writes launches whose blocks, walked as the kernel walks them, read every element of the view once, in order', () => {
    const rng = new Rng(42);
    for (let trial = 0; trial < 200; trial++) {
      // Up to 11 dims, so views past the kernel's rank are split into several launches.
      const { shape, strides } = randomView(rng, 11);
      const dtype = rng.shuffle<DType>(['f32', 'bf16', 'i64'])[0]!;
      const es = ELEMENT_BYTES[dtype];
      const base = 0x7f00_0000_0000 + 256 * rng.int(1000);
      const source = { ptr: base + es * rng.int(50), dtype, shape, strides };
      const want = offsetsOf(shape, strides).map((o) => o + (source.ptr - base) / es);
      const got = new Array<number>(want.length);
      let next = 0;
      for (const launch of launchOffsets(source, base)) {
        expect(launch.dst, 'launches fill dst back to back').toBe(next);
        for (let i = 0; i < launch.count; i++) got[launch.dst + i] = launch.offsets(i);
        next += launch.count;
      }
      expect(got, `shape [${shape}] strides [${strides}]`).toEqual(want);
      const ranks = gatherLaunches(source, 0).map((f) => f.rank);
      expect(Math.max(0, ...ranks)).toBeLessThanOrEqual(GATHER_MAX_RANK);
    }
  });

  it('has no launch for an empty view, and one for a contiguous or offset view however many dims it has', () => {
    expect(gatherLaunches({ ptr: 256, dtype: 'f32', shape: [3, 0, 2], strides: [2, 2, 1] }, 0)).toEqual([]);
    const many = Array.from({ length: 12 }, () => 2);
    const contiguous = many.map((_, d) => 2 ** (11 - d));
    expect(gatherLaunches({ ptr: 260, dtype: 'f32', shape: many, strides: contiguous }, 512)).toHaveLength(1);
    // 12 dims that cannot merge: 2^4 launches of 8 dims each.
    const spread = many.map((_, d) => 3 ** (11 - d));
    expect(gatherLaunches({ ptr: 256, dtype: 'f32', shape: many, strides: spread }, 0)).toHaveLength(16);
  });

  /**
   * The device side of the same math: a host program, compiled by nvcc from
   * strided.cuh and the generated header, reads each parameter block the host
   * wrote and prints the storage offset the kernel would read for every
   * element, so a field placed or decoded differently, or an index decomposed
   * wrongly, shows up as a wrong offset.
   */
  it.skipIf(!nvcc)(`the kernel's index math, compiled by nvcc, reads from the offsets the host planned${nvcc ? '' : ' (skipped: nvcc not found)'}`, () => {
    const rng = new Rng(43);
    const dir = mkdtempSync(join(tmpdir(), 'kvkit-gather-'));
    const cases: { path: string; want: number[] }[] = [];
    for (let trial = 0; trial < 60; trial++) {
      const { shape, strides } = randomView(rng, 11);
      // Large strides too: offsets past 2^32 elements need the 64-bit math.
      const scale = trial % 3 === 0 ? 2 ** 20 + 1 : 1;
      const scaled = strides.map((s) => s * scale);
      const source = { ptr: 2 ** 40, dtype: 'f16' as const, shape, strides: scaled };
      for (const [j, fields] of gatherLaunches(source, 0).entries()) {
        const block = new ParamBlock('GatherStridedParams').write(fields);
        const path = join(dir, `${trial}-${j}.bin`);
        writeFileSync(path, block.bytes.subarray(0, 8 * (4 + 2 * GATHER_MAX_RANK)));
        const local = offsetsOf(
          Array.from({ length: fields.rank }, (_, d) => (fields as unknown as Record<string, number>)[`size${d}`]!),
          Array.from({ length: fields.rank }, (_, d) => (fields as unknown as Record<string, number>)[`stride${d}`]!),
        );
        cases.push({ path, want: local.map((o) => (fields.src - source.ptr) / 2 + o) });
      }
    }
    const source = join(dir, 'gather_offsets.cu');
    writeFileSync(
      source,
      `#include <cstdio>
#include <cstdlib>
#include "strided.cuh"
int main(int argc, char** argv) {
  for (int a = 1; a < argc; a++) {
    kvkit::GatherStridedParams p;
    FILE* f = std::fopen(argv[a], "rb");
    if (!f || std::fread(&p, 1, sizeof p, f) != sizeof p) { std::fprintf(stderr, "short read: %s\\n", argv[a]); return 1; }
    std::fclose(f);
    const kvkit::ViewDims dims = kvkit::gatherDims(p);
    const long long first = (reinterpret_cast<long long>(p.src) - (1LL << 40)) / 2;
    for (long long i = 0; i < p.count; i++) std::printf("%s%lld", i ? " " : "", first + kvkit::viewOffset(dims, i));
    std::printf("\\n");
  }
}
`,
    );
    const exe = join(dir, 'gather_offsets');
    const built = spawnSync(nvcc!, ['-std=c++17', '-I', join(packageRoot, 'src', 'cuda'), source, '-o', exe], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    const ran = spawnSync(exe, cases.map((c) => c.path), { encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
    expect(ran.status, ran.stderr).toBe(0);
    const lines = ran.stdout.split('\n').slice(0, cases.length);
    expect(lines.map((l) => l.split(' ').map(Number))).toEqual(cases.map((c) => c.want));
  }, 120_000);
});

describe('row kernels on views', () => {
  const plan = (qStrides: readonly number[], ptrOffset = 0) => {
    const q = rowStrides({ shape: [37, 8, 128], strides: qStrides });
    return planRows({
      kernel: 'ropePool',
      dtype: 'bf16',
      headDim: 128,
      rotaryDim: 128,
      gptj: false,
      tokens: 37,
      headRows: 12,
      vectorAddresses: [0x1000 + ptrOffset, q.token * 2, q.head * 2],
      elementStrides: [q.element],
      gpu: H200,
    }).path;
  };

  it('take the vector path for q, k, v views of a fused qkv projection, whose rows are contiguous and aligned', () => {
    // [N, (Hq + 2H)·D] with Hq = 8, H = 2, D = 128: q's token stride is the fused row, its head stride D.
    expect(plan([12 * 128, 128, 1])).toBe('nv1');
  });

  it('take the element path where rows are strided, misaligned, or start off a 16-byte boundary', () => {
    expect(plan([12 * 128, 128, 2])).toBe('any');
    expect(plan([12 * 128 + 1, 128, 1])).toBe('any');
    expect(plan([12 * 128, 129, 1])).toBe('any');
    expect(plan([12 * 128, 128, 1], 2)).toBe('any');
  });

  it('ignore the strides of dims of size 1, which never step', () => {
    expect(rowStrides({ shape: [1, 1, 64], strides: [7, 3, 1] })).toEqual({ token: 0, head: 0, element: 1 });
    expect(rowStrides({ shape: [5, 3, 1], strides: [7, 3, 9] })).toEqual({ token: 7, head: 3, element: 1 });
    expect(rowStrides({ shape: [5, 3, 4], strides: [7, 0, 2] })).toEqual({ token: 7, head: 0, element: 2 });
  });
});

describe('ropePoolFused with a Q/K-norm on views', () => {
  // bf16 [N = 5, Hq = 4 | H = 2 | H = 2, D = 64] in one fused projection at 0x1000, rows padded by `pad` elements.
  const fused = (pad: number, offset = 0) => {
    const row = 8 * 64 + pad;
    const at = (first: number, heads: number) => ({ ptr: 0x1000 + 2 * (offset + first), shape: [5, heads, 64], strides: [row, 64, 1] });
    return [at(0, 4), at(4 * 64, 2), at(6 * 64, 2)];
  };

  it('reads views in place where their rows are vector-ready, or where no norm is asked for', () => {
    expect(stagedRows(fused(16, 8), true, true, 2)).toEqual([false, false, false]);
    expect(stagedRows(fused(3, 5), false, true, 2)).toEqual([false, false, false]);
  });

  it('copies the views that alone would keep the call off the vector path, so they norm as their contiguous copies do', () => {
    expect(stagedRows(fused(3), true, true, 2)).toEqual([true, true, true]);
    expect(stagedRows(fused(16, 1), true, true, 2)).toEqual([true, true, true]);
    const [q, , v] = fused(16);
    expect(stagedRows([q!, { ptr: 0x2000, shape: [5, 2, 64], strides: [128, 1, 2] }, v!], true, true, 2)).toEqual([false, true, false]);
  });

  it('copies nothing where the shape keeps every layout on the element path', () => {
    expect(stagedRows(fused(3), true, false, 2)).toEqual([false, false, false]);
  });
});
