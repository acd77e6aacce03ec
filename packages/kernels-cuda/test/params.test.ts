import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { PARAM_LAYOUTS, ParamBlock } from '../src/runtime/params.js';
import { packageRoot } from './helpers.js';

/** Field names of each `struct X { ... };` in params.cuh, in order. */
function cudaStructs(): Record<string, string[]> {
  const text = readFileSync(join(packageRoot, 'src', 'cuda', 'params.cuh'), 'utf8').replace(/\/\/.*$/gm, '');
  const structs: Record<string, string[]> = {};
  for (const m of text.matchAll(/struct (\w+) \{([^}]*)\};/g)) {
    structs[m[1]!] = m[2]!
      .split(';')
      .map((decl) => decl.trim())
      .filter(Boolean)
      .map((decl) => /(\w+)$/.exec(decl)![1]!);
  }
  return structs;
}

describe('kernel parameter blocks', () => {
  it('the host writes the fields of every CUDA parameter struct, in the struct order', () => {
    const structs = cudaStructs();
    for (const [name, fields] of Object.entries(PARAM_LAYOUTS)) expect(structs[name], name).toEqual([...fields]);
  });

  it('every field of those structs is 8 bytes wide (a pointer, long long or double)', () => {
    const text = readFileSync(join(packageRoot, 'src', 'cuda', 'params.cuh'), 'utf8').replace(/\/\/.*$/gm, '');
    for (const name of Object.keys(PARAM_LAYOUTS)) {
      const body = new RegExp(`struct ${name} \\{([^}]*)\\};`).exec(text)![1]!;
      for (const decl of body.split(';').map((d) => d.trim()).filter(Boolean)) {
        expect(decl, `${name}: ${decl}`).toMatch(/^(const )?[\w ]+\* \w+$|^long long \w+$|^double \w+$/);
      }
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
});
