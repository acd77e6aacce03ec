/**
 * KV pool rows in WGSL, for every kernel that writes or reads a pool: where
 * the row of (slot, head) starts (contracts/backend/kvPoolLayout.ts, the D
 * elements of a row contiguous in both layouts), and the fp8 codes of a row
 * vector, four a word, each the code of x / scale as the host codec gives it.
 */
import type { FloatDType, Fp8DType } from '@kvkit/contracts';
import type { PoolLayoutName } from '@kvkit/contracts/backend';
import { wordValues } from './common.wgsl.js';
import { fp8ExactCodeOf, fp8FastWordOf, fp8FixWordOf } from './fp8.wgsl.js';
import { tuning } from './plan.js';
import type { RowLayout } from './plan.js';
import { vectorWords } from './rowCode.js';

/** A pool as a row kernel writes it: its layout, and its fp8 format (absent: the model dtype, bits as they are). */
export interface PoolFormat {
  readonly layout: PoolLayoutName;
  readonly fp8?: Fp8DType;
  /** fp8: where codes too close to a rounding boundary for the fast path take the exact division (tuning.fp8Exact). */
  readonly fp8Exact?: Fp8ExactPath;
}

/**
 * Where the row kernels redo, by the exact division, the fp8 codes whose fast
 * product lies too close to a rounding boundary: 'element' inline at each
 * element (the division compiled once per element), 'word' in one loop per
 * word of four codes, 'row' in one loop over every code a store of row
 * vectors writes (storeRowVectors: a whole invocation's in the RoPE kernel).
 */
export type Fp8ExactPath = 'element' | 'word' | 'row';

/** One row vector a kernel stores into a pool. */
export interface RowVectorStore {
  /** WGSL reference the vector (or its codes) goes to. */
  readonly target: string;
  /** WGSL expression: the vector, words of the model dtype. */
  readonly vector: string;
  /** WGSL name of the f32 bits of the pool's scale (fp8). */
  readonly scale: string;
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
export function storeRowVector(fp8: Fp8DType | undefined, dtype: FloatDType, layout: RowLayout, target: string, vector: string, scale: string, exact: Fp8ExactPath = tuning.fp8Exact): string {
  return storeRowVectors(fp8, dtype, layout, [{ target, vector, scale }], exact);
}

/**
 * WGSL statement storing row vectors (words of `dtype`) into pools: as they
 * are, or as their fp8 codes, four a word, each the code of x / scale. The
 * fast path takes every code from x times the row's inverse scale (made once
 * per scale); the few too close to a rounding boundary to tell, and every
 * code of a row whose scale the fast path does not take, are redone by the
 * exact division where `exact` says, and only then are the vectors stored.
 */
export function storeRowVectors(fp8: Fp8DType | undefined, dtype: FloatDType, layout: RowLayout, stores: readonly RowVectorStore[], exact: Fp8ExactPath = tuning.fp8Exact): string {
  if (!fp8) return stores.map((s) => `${s.target} = ${s.vector};`).join(' ');
  const scales = [...new Set(stores.map((s) => s.scale))];
  const k = (scale: string) => `fs${scales.indexOf(scale)}`;
  const lines = scales.map((scale, i) => `let fs${i} = fp8ScaleOf(${scale});`);
  // Every word of every store, in order: its f32 bits, fast codes, scale.
  const words: { bits: string; fast: string; word: string; scale: string }[] = [];
  stores.forEach((store, j) => {
    lines.push(`let sv${j} = ${store.vector};`);
    elementBits(dtype, layout, `sv${j}`).forEach((bits, w) => {
      const name = `${j}_${w}`;
      lines.push(`let fb${name} = vec4<u32>(${bits.join(', ')});`, `let ff${name} = ${fp8FastWordOf(fp8, `fb${name}`, k(store.scale))};`, `var fw${name} = ff${name}.word;`);
      words.push({ bits: `fb${name}`, fast: `ff${name}`, word: `fw${name}`, scale: store.scale });
    });
  });
  const redo = (w: (typeof words)[number]) => `select(fp8NearBits(${w.fast}.near), 0xfu, ${k(w.scale)}.exact)`;
  const tested = (ws: readonly (typeof words)[number][]) => [...new Set(ws.map((w) => `${k(w.scale)}.exact`)), ...ws.map((w) => `any(${w.fast}.near)`)].join(' || ');
  if (exact === 'element') {
    for (const w of words) {
      for (const [i, c] of ['x', 'y', 'z', 'w'].entries()) {
        lines.push(`if (${k(w.scale)}.exact || ${w.fast}.near.${c}) { ${w.word} = fp8WithCode(${w.word}, ${i}u, ${fp8ExactCodeOf(fp8, `${w.bits}.${c}`, w.scale)}); }`);
      }
    }
  } else if (exact === 'word') {
    for (const w of words) lines.push(`if (${tested([w])}) { ${w.word} = ${fp8FixWordOf(fp8, w.word, w.bits, w.scale, redo(w))}; }`);
  } else {
    lines.push(fixRow(fp8, words, redo, tested, scales.length > 1));
  }
  const perVector = layout.elements / 4;
  stores.forEach((store, j) => {
    const codes = Array.from({ length: perVector }, (_, w) => `fw${j}_${w}`);
    lines.push(`${store.target} = ${codes.length === 1 ? codes[0] : `vec2<u32>(${codes.join(', ')})`};`);
  });
  return `{
    ${lines.join('\n    ')}
  }`;
}

/**
 * WGSL statement redoing, in one loop over a mask of every code of the
 * words (four bits a word, at most eight words), the codes the fast path
 * could not tell: the division is compiled once for all of them. Word
 * `i / 4`'s bits and scale are picked, and its code set, by selects.
 */
function fixRow(
  fp8: Fp8DType,
  words: readonly { bits: string; fast: string; word: string; scale: string }[],
  redo: (w: { bits: string; fast: string; word: string; scale: string }) => string,
  tested: (ws: readonly { bits: string; fast: string; word: string; scale: string }[]) => string,
  scaled: boolean,
): string {
  if (words.length > 8) throw new Error(`kernels-wgsl: ${words.length} fp8 words in one store, more than a mask holds`);
  const pick = (values: readonly string[]): string => values.slice(1).reduce((acc, v, i) => `select(${acc}, ${v}, wi == ${i + 1}u)`, values[0]!);
  const body = [
    'let i = firstTrailingBit(m);',
    'm = m & (m - 1u);',
    'let wi = i >> 2u;',
    `let xs = ${pick(words.map((w) => w.bits))};`,
    'let x = xs[i & 3u];',
    `let code = ${fp8ExactCodeOf(fp8, 'x', scaled ? pick(words.map((w) => w.scale)) : words[0]!.scale)};`,
    ...words.map((w, n) => `if (wi == ${n}u) { ${w.word} = fp8WithCode(${w.word}, i & 3u, code); }`),
  ];
  return `if (${tested(words)}) {
      var m = ${words.map((w, n) => (n === 0 ? redo(w) : `(${redo(w)} << ${4 * n}u)`)).join(' | ')};
      loop {
        if (m == 0u) { break; }
        ${body.join('\n        ')}
      }
    }`;
}

/** WGSL expressions: the f32 bits of a row vector's elements (in `name`, words of `dtype`), four a word of codes. */
function elementBits(dtype: FloatDType, layout: RowLayout, name: string): string[][] {
  // A half word's two values come from one decode (f16: the pair conversion the plan's f16 picks).
  const bits = vectorWords(layout, name).flatMap((w) => (dtype === 'f32' ? [w] : wordValues(dtype, w).map((x) => `bitcast<u32>(${x})`)));
  const words: string[][] = [];
  for (let i = 0; i < bits.length; i += 4) words.push(bits.slice(i, i + 4));
  return words;
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

