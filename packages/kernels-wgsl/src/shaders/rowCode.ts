/**
 * Code generation shared by the head-row kernels (norm + RoPE, RoPE only):
 * vector types, element reads of a row, the rotation of one vector's elements
 * with their partners, and packing results back into words.
 */
import type { FloatDType } from '@kvkit/contracts';
import { encodeHalf, packWord, wordValues } from './common.wgsl.js';
import type { PartnerMode, RopeStyle, RowLayout } from './plan.js';

/** The WGSL element type of a row array: u32, vec2<u32> or vec4<u32>. */
export function vectorType(layout: RowLayout): string {
  return layout.vecWords === 1 ? 'u32' : `vec${layout.vecWords}<u32>`;
}

/** The u32 words of a vector value held in `name`. */
export function vectorWords(layout: RowLayout, name: string): string[] {
  if (layout.vecWords === 1) return [name];
  return ['x', 'y', 'z', 'w'].slice(0, layout.vecWords).map((c) => `${name}.${c}`);
}

/** The f32 values of a vector held in `name` (in element access `name` already holds the f32). */
export function vectorValues(dtype: FloatDType, layout: RowLayout, name: string): string[] {
  if (layout.access === 'element') return [name];
  return vectorWords(layout, name).flatMap((w) => wordValues(dtype, w));
}

/** WGSL expression building a vector from its elements' f32 values, rounded to the dtype. */
export function packVector(dtype: FloatDType, layout: RowLayout, values: readonly string[]): string {
  const perWord = dtype === 'f32' ? 1 : 2;
  const words: string[] = [];
  for (let w = 0; w < layout.vecWords; w++) words.push(packWord(dtype, values.slice(w * perWord, (w + 1) * perWord)));
  return layout.vecWords === 1 ? words[0]! : `${vectorType(layout)}(${words.join(', ')})`;
}

/**
 * A WGSL function `name(e: u32) -> f32` reading element `e` of an array whose
 * items are vectors of this layout (or single u32 words in element access).
 */
export function rowElementReader(name: string, array: string, dtype: FloatDType, layout: RowLayout): string {
  const perWord = dtype === 'f32' ? 1 : 2;
  const wordOf =
    layout.access === 'element' || layout.vecWords === 1 ? `${array}[e / ${perWord}u]` : `${array}[e / ${layout.elements}u][(e % ${layout.elements}u) / ${perWord}u]`;
  if (dtype === 'f32') return `fn ${name}(e: u32) -> f32 { return bitcast<f32>(${wordOf}); }`;
  const decode = dtype === 'f16' ? 'f16ToF32' : 'bf16ToF32';
  return `fn ${name}(e: u32) -> f32 { return ${decode}(${wordOf} >> ((e & 1u) * 16u)); }`;
}

/**
 * A WGSL function storing the 16 bits of element `e` into an `array<atomic<u32>>`:
 * two atomics on the word, so the other half (a neighbouring row's) is never disturbed.
 */
export function halfStorer(name: string, array: string): string {
  return `fn ${name}(e: u32, bits: u32) {
  let shift = (e & 1u) * 16u;
  atomicAnd(&${array}[e >> 1u], ~(0xffffu << shift));
  atomicOr(&${array}[e >> 1u], (bits & 0xffffu) << shift);
}`;
}

/** WGSL statements storing element `e`'s f32 value in element access (f32 words are whole; halves go through the atomic storer). */
export function storeElement(dtype: FloatDType, array: string, storer: string, e: string, value: string): string {
  if (dtype === 'f32') return `${array}[${e}] = bitcast<u32>(${value});`;
  return `${storer}(${e}, ${encodeHalf(dtype, value)});`;
}

export interface RotationInputs {
  readonly style: RopeStyle;
  readonly partner: PartnerMode;
  readonly layout: RowLayout;
  readonly R: number;
  /** Names of the (normed) f32 values of this vector's elements. */
  readonly values: readonly string[];
  /** WGSL expression: index of this vector within the row. */
  readonly vector: string;
  /** Declares and returns the (normed) value of the partner of element index `i` (a WGSL expression) in the row. */
  readonly partnerValue: (i: string, out: string) => string;
  /** Declares and returns the partner vector's (normed) values, for 'chunk' partners, given its vector index expression. */
  readonly partnerVector: (vector: string, prefix: string) => { code: string; values: string[] };
  /** WGSL expression: the cos (`which` = 0) or sin (1) of rotation pair j. */
  readonly cosSin: (j: string, which: 0 | 1) => string;
  /** Prefix for generated names. */
  readonly prefix: string;
}

/**
 * WGSL statements rotating the elements of one vector; returns the names of
 * the rotated values. Elements at or past R keep their value.
 */
export function rotateVector(r: RotationInputs): { code: string; out: string[] } {
  const E = r.layout.elements;
  const half = r.R / 2;
  const lines: string[] = [];
  const out: string[] = [];
  const p = r.prefix;
  lines.push(`let ${p}first = ${r.vector} * ${E}u;`);
  if (r.partner === 'local') {
    // gptj: pairs (2j, 2j + 1) sit in one vector.
    for (let k = 0; k < E; k += 2) {
      const i = `(${p}first + ${k}u)`;
      lines.push(`let ${p}rot${k} = ${i} < ${r.R}u;`);
      lines.push(`let ${p}j${k} = select(0u, ${i} / 2u, ${p}rot${k});`);
      lines.push(`let ${p}c${k} = select(1.0, ${r.cosSin(`${p}j${k}`, 0)}, ${p}rot${k});`);
      lines.push(`let ${p}s${k} = select(0.0, ${r.cosSin(`${p}j${k}`, 1)}, ${p}rot${k});`);
      lines.push(`let ${p}o${k} = ${r.values[k]} * ${p}c${k} - ${r.values[k + 1]} * ${p}s${k};`);
      lines.push(`let ${p}o${k + 1} = ${r.values[k + 1]} * ${p}c${k} + ${r.values[k]} * ${p}s${k};`);
      out.push(`${p}o${k}`, `${p}o${k + 1}`);
    }
    return { code: lines.join('\n    '), out };
  }
  if (r.partner === 'chunk') {
    // neox with R/2 a whole number of vectors: the partner of this vector is the one R/2 elements away.
    const shift = half / E;
    lines.push(`let ${p}lower = ${p}first < ${half}u;`);
    lines.push(`let ${p}rot = ${p}first < ${r.R}u;`);
    lines.push(`let ${p}pv = select(${r.vector}, select(${r.vector} - ${shift}u, ${r.vector} + ${shift}u, ${p}lower), ${p}rot);`);
    const partner = r.partnerVector(`${p}pv`, `${p}p`);
    lines.push(partner.code);
    lines.push(`let ${p}sign = select(1.0, -1.0, ${p}lower);`);
    lines.push(`let ${p}j0 = select(0u, select(${p}first - ${half}u, ${p}first, ${p}lower), ${p}rot);`);
    for (let k = 0; k < E; k++) {
      lines.push(`let ${p}c${k} = select(1.0, ${r.cosSin(`(${p}j0 + ${k}u)`, 0)}, ${p}rot);`);
      lines.push(`let ${p}s${k} = select(0.0, ${r.cosSin(`(${p}j0 + ${k}u)`, 1)}, ${p}rot);`);
      lines.push(`let ${p}o${k} = ${r.values[k]} * ${p}c${k} + ${p}sign * ${partner.values[k]} * ${p}s${k};`);
      out.push(`${p}o${k}`);
    }
    return { code: lines.join('\n    '), out };
  }
  // Any layout: each element finds its partner on its own.
  for (let k = 0; k < E; k++) {
    const i = `${p}i${k}`;
    lines.push(`let ${i} = ${p}first + ${k}u;`);
    lines.push(`let ${p}rot${k} = ${i} < ${r.R}u;`);
    if (r.style === 'neox') {
      lines.push(`let ${p}lower${k} = ${i} < ${half}u;`);
      lines.push(`let ${p}pi${k} = select(${i}, select(${i} - ${half}u, ${i} + ${half}u, ${p}lower${k}), ${p}rot${k});`);
      lines.push(`let ${p}j${k} = select(0u, select(${i} - ${half}u, ${i}, ${p}lower${k}), ${p}rot${k});`);
      lines.push(`let ${p}sign${k} = select(1.0, -1.0, ${p}lower${k});`);
    } else {
      lines.push(`let ${p}pi${k} = select(${i}, ${i} ^ 1u, ${p}rot${k});`);
      lines.push(`let ${p}j${k} = select(0u, ${i} / 2u, ${p}rot${k});`);
      lines.push(`let ${p}sign${k} = select(1.0, -1.0, (${i} & 1u) == 0u);`);
    }
    lines.push(r.partnerValue(`${p}pi${k}`, `${p}pval${k}`));
    lines.push(`let ${p}c${k} = select(1.0, ${r.cosSin(`${p}j${k}`, 0)}, ${p}rot${k});`);
    lines.push(`let ${p}s${k} = select(0.0, ${r.cosSin(`${p}j${k}`, 1)}, ${p}rot${k});`);
    lines.push(`let ${p}o${k} = ${r.values[k]} * ${p}c${k} + ${p}sign${k} * ${p}pval${k} * ${p}s${k};`);
    out.push(`${p}o${k}`);
  }
  return { code: lines.join('\n    '), out };
}

/**
 * WGSL statements adding `sum` over the `lanes` lanes of one row (aligned
 * groups of a workgroup): subgroup shuffles, or the workgroup's `partial`
 * array and a barrier (so they must run in uniform control flow).
 */
export function laneSumCode(reduction: 'none' | 'subgroup' | 'workgroup', lanes: number, sum: string): string {
  if (reduction === 'subgroup') return Array.from({ length: Math.log2(lanes) }, (_, i) => `${sum} += subgroupShuffleXor(${sum}, ${lanes >> (i + 1)}u);`).join('\n  ');
  if (reduction === 'workgroup') {
    return `partial[lane] = ${sum};
  workgroupBarrier();
  ${sum} = 0.0;
  for (var i = 0u; i < ${lanes}u; i++) { ${sum} += partial[(lane / ${lanes}u) * ${lanes}u + i]; }`;
  }
  return '';
}
