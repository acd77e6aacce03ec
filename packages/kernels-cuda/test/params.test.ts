import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@kvkit/conformance';
import { cudaKernels, deviceRecords } from '@kvkit/contracts/kernels';
import type { CudaKernelDecl } from '@kvkit/contracts/kernels';
import { describe, expect, it } from 'vitest';
import { RECORD_BYTES } from '../src/generated/kernels.js';
import type { GemmParamsFields, ParamFields, ParamStruct } from '../src/generated/kernels.js';
import type { CudaContext } from '../src/runtime/context.js';
import { ParamBlock } from '../src/runtime/params.js';
import { nvcc, packageRoot } from './helpers.js';

/** Random values for every declared field: pointers and integers as safe integers of either sign, doubles as doubles. */
function randomFields(k: CudaKernelDecl, rng: Rng): Record<string, number> {
  const values: Record<string, number> = {};
  for (const [name, p] of Object.entries(k.params)) {
    values[name] =
      p.kind === 'f64' ? (rng.next() - 0.5) * 2 ** (rng.int(121) - 60) : Math.floor(rng.next() * 2 ** 52) * (p.kind === 'pointer' || rng.next() < 0.5 ? 1 : -1);
  }
  return values;
}

/** A block of k's struct with every field written from random values. */
function fill(k: CudaKernelDecl, rng: Rng, block = new ParamBlock(k.struct as ParamStruct)): { block: ParamBlock<ParamStruct>; values: Record<string, number> } {
  const values = randomFields(k, rng);
  block.write(values as unknown as ParamFields[ParamStruct]);
  return { block, values };
}

/** Every field as the block's bytes hold it, by declared position. */
function readBack(k: CudaKernelDecl, block: ParamBlock<ParamStruct>): Record<string, number> {
  return Object.fromEntries(
    Object.entries(k.params).map(([name, p], i) => [name, p.kind === 'f64' ? block.bytes.readDoubleLE(8 * i) : Number(block.bytes.readBigInt64LE(8 * i))]),
  );
}

const GEMM_FIELDS: GemmParamsFields = { a: 0x7f12_3456_7890, b: -1, c: -(2 ** 40) - 3, m: Infinity, n: -Infinity, k: 2 ** 53 - 1, batchStrideB: 7, batchStrideC: -(2 ** 33) };

describe('kernel parameter blocks', () => {
  it('the host writes parameter i of every declared struct to bytes [8i, 8i + 8), little-endian', () => {
    const rng = new Rng(11);
    for (const k of cudaKernels) {
      const { block, values } = fill(k, rng);
      expect(readBack(k, block), k.struct).toEqual(values);
    }
  });

  it('each write replaces every field of the reused block, so nothing of the launch before survives', () => {
    const rng = new Rng(13);
    for (const k of cudaKernels) {
      const { block, values: first } = fill(k, rng);
      const { values: second } = fill(k, rng, block);
      const got = readBack(k, block);
      expect(got, k.struct).toEqual(second);
      for (const name of Object.keys(k.params)) expect(got[name], `${k.struct}.${name}`).not.toBe(first[name]);
    }
  });

  it('writes pointers, negative integers and the int64 extremes as little-endian 64-bit words', () => {
    const p = new ParamBlock('GemmParams').write(GEMM_FIELDS);
    const word = (i: number) => p.bytes.readBigInt64LE(i * 8);
    expect(word(0)).toBe(0x7f12_3456_7890n);
    expect(word(1)).toBe(-1n);
    expect(word(2)).toBe(-(2n ** 40n) - 3n);
    expect(word(3)).toBe(2n ** 63n - 1n);
    expect(word(4)).toBe(-(2n ** 63n));
    expect(word(5)).toBe(2n ** 53n - 1n);
    expect(word(6)).toBe(7n);
    expect(word(7)).toBe(-(2n ** 33n));
    // Doubles go through the double path, not the integer one.
    const f = new ParamBlock('FillParams').write({ data: 16, count: 3, seed: -5, scale: 0.25 });
    expect(f.bytes.readDoubleLE(3 * 8)).toBe(0.25);
    expect(f.bytes.readBigInt64LE(2 * 8)).toBe(-5n);
    // kernelParams points at the bytes
    expect(f.argv.readBigUInt64LE(0)).not.toBe(0n);
  });

  it('a value that is not a number (past the types) is refused by name, not written as 0', () => {
    const p = new ParamBlock('GemmParams');
    const { batchStrideC: _, ...partial } = GEMM_FIELDS;
    expect(() => p.write(partial as GemmParamsFields)).toThrow('GemmParams.batchStrideC was given no number (undefined)');
  });

  /**
   * The generated header as nvcc compiles it reads the host's bytes back: a
   * host program copies each block written by ParamBlock into its struct and
   * prints every field, so a field the two sides place differently shows up
   * as a wrong value.
   */
  it.skipIf(!nvcc)(`the structs nvcc compiles from the generated header read every field the host wrote${nvcc ? '' : ' (skipped: nvcc not found)'}`, () => {
    const rng = new Rng(12);
    const dir = mkdtempSync(join(tmpdir(), 'kvkit-params-'));
    const filled = cudaKernels.map((k) => ({ k, ...fill(k, rng) }));
    const reads = filled.map(({ k, block }, i) => {
      const path = join(dir, `${k.struct}.bin`);
      writeFileSync(path, block.bytes.subarray(0, 8 * Object.keys(k.params).length));
      const prints = Object.entries(k.params).map(([name, p]) =>
        p.kind === 'f64'
          ? `std::printf("${k.struct}.${name} %.17g\\n", s${i}.${name});`
          : p.kind === 'pointer'
            ? `std::printf("${k.struct}.${name} %lld\\n", static_cast<long long>(reinterpret_cast<std::uintptr_t>(s${i}.${name})));`
            : `std::printf("${k.struct}.${name} %lld\\n", s${i}.${name});`,
      );
      return `  {\n    kvkit::${k.struct} s${i};\n    read("${path}", &s${i}, sizeof s${i});\n    ${prints.join('\n    ')}\n  }`;
    });
    const source = join(dir, 'read_params.cu');
    writeFileSync(
      source,
      `#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include "generated/params.cuh"
static void read(const char* path, void* to, size_t bytes) {
  FILE* f = std::fopen(path, "rb");
  if (!f || std::fread(to, 1, bytes, f) != bytes) { std::fprintf(stderr, "short read: %s\\n", path); std::exit(1); }
  std::fclose(f);
}
int main() {
${reads.join('\n')}
${deviceRecords.map((r) => `  std::printf("sizeof(${r.struct}) %zu\\n", sizeof(kvkit::${r.struct}));`).join('\n')}
}
`,
    );
    const exe = join(dir, 'read_params');
    const built = spawnSync(nvcc!, ['-std=c++17', '-I', join(packageRoot, 'src', 'cuda'), source, '-o', exe], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    const ran = spawnSync(exe, { encoding: 'utf8' });
    expect(ran.status, ran.stderr).toBe(0);
    const seen = Object.fromEntries(ran.stdout.trim().split('\n').map((line) => line.split(' ') as [string, string]));
    const expected = {
      ...Object.fromEntries(filled.flatMap(({ k, values }) => Object.entries(values).map(([name, v]) => [`${k.struct}.${name}`, v]))),
      // The host sizes device records (the bad-value record, the slot-owner table) by these.
      ...Object.fromEntries(Object.entries(RECORD_BYTES).map(([r, bytes]) => [`sizeof(${r})`, bytes])),
    };
    expect(Object.fromEntries(Object.entries(seen).map(([f, v]) => [f, Number(v)]))).toEqual(expected);
  }, 120_000);
});

/**
 * Compile-time checks (tsc runs them in typecheck): a field left out, one not
 * declared, a value that is not a number, or a block of another struct does
 * not compile. Pointers, int64s and doubles are all numbers on the host, so
 * the types cannot tell a double given for a pointer; the layout's kind
 * decides how each is encoded.
 */
export function rejectedByTsc(gemm: ParamBlock<'GemmParams'>, fillBlock: ParamBlock<'FillParams'>, cx: CudaContext): void {
  // @ts-expect-error a field left out
  gemm.write({ a: 1, b: 2, c: 3, m: 4, n: 5, k: 6, batchStrideB: 7 });
  // @ts-expect-error a misspelt field
  gemm.write({ a: 1, b: 2, c: 3, m: 4, n: 5, k: 6, batchStrideB: 7, batchStridec: 8 });
  // @ts-expect-error a field the struct does not declare
  fillBlock.write({ data: 1, count: 2, seed: 3, scale: 0.5, offset: 4 });
  // @ts-expect-error a flag given as a boolean (the kernels take 0 or 1)
  fillBlock.write({ data: 1, count: 2, seed: true, scale: 0.5 });
  // @ts-expect-error another struct's fields
  fillBlock.write(GEMM_FIELDS);
  // @ts-expect-error a block of another kernel's struct
  cx.launch('copy_vectors', gemm, 1, 1, 256, 0, 'test');
  // @ts-expect-error an entry point that is not declared
  cx.launch('gemm_simt_f16', gemm, 1, 1, 256, 0, 'test');
}
