/**
 * KV pool rows in WGSL, for every kernel that writes or reads a pool: where
 * the row of (slot, head) starts (contracts/backend/kvPoolLayout.ts, the D
 * elements of a row contiguous in both layouts), and the fp8 codes of a row
 * vector, four a word, each the code of x / scale as the host codec gives it.
 */
import type { FloatDType, Fp8DType } from '@kvkit/contracts';
import type { PoolLayoutName } from '@kvkit/contracts/backend';
import { wordValues } from './common.wgsl.js';
import { fp8Word } from './fp8.wgsl.js';
import type { RowLayout } from './plan.js';
import { vectorWords } from './rowCode.js';

/** A pool as a row kernel writes it: its layout, and its fp8 format (absent: the model dtype, bits as they are). */
export interface PoolFormat {
  readonly layout: PoolLayoutName;
  readonly fp8?: Fp8DType;
}

/**
 * WGSL `fn poolRow(slot, head, heads, pageSize) -> u32`: the index, in rows
 * of D elements within one layer, of (slot, head)'s row: NHD `slot * H + head`;
 * HND page `slot / pageSize`, row `slot % pageSize` of that head's block.
 */
export function poolRowWgsl(layout: PoolLayoutName): string {
  const body =
    layout === 'NHD'
      ? 'return slot * heads + head;'
      : 'let page = slot / pageSize;\n  return (page * heads + head) * pageSize + (slot - page * pageSize);';
  return `fn poolRow(slot: u32, head: u32, heads: u32, pageSize: u32) -> u32 {\n  ${body}\n}`;
}

/** The WGSL type a row kernel stores into a pool per row vector: the vector itself, or its E fp8 codes (E = 4 or 8: one or two words). */
export function poolVectorType(layout: RowLayout, dst: string, fp8: Fp8DType | undefined): string {
  if (!fp8) return dst;
  return layout.elements === 8 ? 'vec2<u32>' : 'u32';
}

/** WGSL statement storing row vector `vector` (words of `dtype`) at `target`: as it is, or as its fp8 codes over the scale of f32 bits `scale`. */
export function storeRowVector(fp8: Fp8DType | undefined, dtype: FloatDType, layout: RowLayout, target: string, vector: string, scale: string): string {
  return fp8 ? `{ let w = ${vector}; ${target} = ${fp8Vector(fp8, dtype, layout, 'w', scale)}; }` : `${target} = ${vector};`;
}

/**
 * WGSL statements defining `kScaleBits` and `vScaleBits` (the `parts` asked
 * for): the f32 bits of head `head`'s scales, read by `word` from the words
 * the kernel's kScaleAt / vScaleAt uniforms name (one per head, or one).
 */
export function scaleBitsWgsl(parts: readonly ('k' | 'v')[], head: string, word: (index: string) => string): string {
  return parts.map((x) => `let ${x}ScaleBits = ${word(`params.${x}ScaleAt + ${head} * params.${x}ScaleStep`)};`).join('\n  ');
}

/** Bytes of one row vector as a pool stores it. */
export function poolVectorBytes(layout: RowLayout, elementBytes: number, fp8: Fp8DType | undefined): number {
  return fp8 ? layout.elements : layout.access === 'element' ? elementBytes : layout.vecWords * 4;
}

/**
 * WGSL expression: the fp8 codes of row vector `vector` (words of `dtype`,
 * the values as stored in it) over the scale whose f32 bits are `scale`,
 * packed four a word, lowest element in the lowest byte.
 */
function fp8Vector(fp8: Fp8DType, dtype: FloatDType, layout: RowLayout, vector: string, scale: string): string {
  // A half word's two values come from one decode (f16: the pair conversion the plan's f16 picks).
  const bits = vectorWords(layout, vector).flatMap((w) => (dtype === 'f32' ? [w] : wordValues(dtype, w).map((x) => `bitcast<u32>(${x})`)));
  const words: string[] = [];
  for (let i = 0; i < bits.length; i += 4) words.push(fp8Word(fp8, `vec4<u32>(${bits.slice(i, i + 4).join(', ')})`, scale));
  return words.length === 1 ? words[0]! : `vec2<u32>(${words.join(', ')})`;
}
