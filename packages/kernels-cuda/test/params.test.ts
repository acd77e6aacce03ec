import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Rng } from '@kvkit/conformance';
import { cudaKernels, deviceRecords } from '@kvkit/contracts/kernels';
import type { CudaKernelDecl } from '@kvkit/contracts/kernels';
import { describe, expect, it } from 'vitest';
import { RECORD_BYTES } from '../src/generated/kernels.js';
import type { ParamStruct } from '../src/generated/kernels.js';
import type { CudaContext } from '../src/runtime/context.js';
import { ParamBlock } from '../src/runtime/params.js';
import { nvcc, packageRoot } from './helpers.js';

type AnyBlock = ParamBlock<ParamStruct> & { set(field: string, value: number): AnyBlock; setDouble(field: string, value: number): AnyBlock };

/** Random values for every declared field: pointers and integers as safe integers of either sign, doubles as doubles. */
function fill(k: CudaKernelDecl, rng: Rng): { block: ParamBlock<ParamStruct>; values: Record<string, number> } {
  const block = new ParamBlock(k.struct as ParamStruct) as AnyBlock;
  const values: Record<string, number> = {};
  for (const [name, p] of Object.entries(k.params)) {
    if (p.kind === 'f64') {
      values[name] = (rng.next() - 0.5) * 2 ** (rng.int(121) - 60);
      block.setDouble(name, values[name]);
    } else {
      const v = Math.floor(rng.next() * 2 ** 52) * (p.kind === 'pointer' || rng.next() < 0.5 ? 1 : -1);
      values[name] = v;
      block.set(name, v);
    }
  }
  return { block, values };
}

describe('kernel parameter blocks', () => {
  it('the host writes parameter i of every declared struct to bytes [8i, 8i + 8), little-endian, and nothing else there', () => {
    const rng = new Rng(11);
    for (const k of cudaKernels) {
      const { block, values } = fill(k, rng);
      Object.entries(k.params).forEach(([name, p], i) => {
        const got = p.kind === 'f64' ? block.bytes.readDoubleLE(8 * i) : Number(block.bytes.readBigInt64LE(8 * i));
        expect(got, `${k.struct}.${name}`).toBe(values[name]);
      });
    }
  });

  it('writes pointers, negative integers and the int64 extremes as little-endian 64-bit words', () => {
    const p = new ParamBlock('GemmParams');
    p.set('a', 0x7f12_3456_7890).set('b', -1).set('c', -(2 ** 40) - 3).set('m', Infinity).set('n', -Infinity).set('k', 2 ** 53 - 1);
    const word = (i: number) => p.bytes.readBigInt64LE(i * 8);
    expect(word(0)).toBe(0x7f12_3456_7890n);
    expect(word(1)).toBe(-1n);
    expect(word(2)).toBe(-(2n ** 40n) - 3n);
    expect(word(3)).toBe(2n ** 63n - 1n);
    expect(word(4)).toBe(-(2n ** 63n));
    expect(word(5)).toBe(2n ** 53n - 1n);
    // kernelParams points at the bytes
    const f = new ParamBlock('FillParams').setDouble('scale', 0.25);
    expect(f.bytes.readDoubleLE(3 * 8)).toBe(0.25);
    expect(f.argv.readBigUInt64LE(0)).not.toBe(0n);
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

/** Compile-time checks (tsc runs them in typecheck): a field that is not declared, or of the other kind, does not compile. */
export function rejectedByTsc(gemm: ParamBlock<'GemmParams'>, fillBlock: ParamBlock<'FillParams'>, cx: CudaContext): void {
  // @ts-expect-error a misspelt field
  gemm.set('batchStride', 1);
  // @ts-expect-error a double written as an integer
  fillBlock.set('scale', 1);
  // @ts-expect-error an integer written as a double
  fillBlock.setDouble('count', 1);
  // @ts-expect-error a block of another kernel's struct
  cx.launch('copy_vectors', gemm, 1, 1, 256, 0, 'test');
  // @ts-expect-error an entry point that is not declared
  cx.launch('gemm_simt_f16', gemm, 1, 1, 256, 0, 'test');
}
