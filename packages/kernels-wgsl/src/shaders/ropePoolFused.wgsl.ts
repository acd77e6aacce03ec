/**
 * RoPE without a norm, one invocation per vector of a head row (SEMANTICS.md §3).
 * The query part rotates every query head into qRot; the key part rotates
 * every key head into kRot and, for tokens with a slot in the pool, into
 * kPool, and copies the value head into vPool bit for bit, or stores both as
 * fp8 codes of x / scale (whole words per invocation: D is a multiple of 4
 * there), at the row of either pool layout. Negative slots
 * skip the token; a slot at or past the pool rejected the call (its value
 * check raised the slot's flag word, which the key part reads first, and
 * writes nothing). cos/sin come from a per-token table (ropeTable.wgsl.ts),
 * row n for token n.
 *
 * Kind 'all' runs both parts in one dispatch (10 storage bindings, where the
 * device allows them); 'q' and 'kv' split them over two dispatches. With
 * valueLanes (fp8 pools) each token's V rows follow its K rows as rows of
 * their own, so a key lane encodes only K's codes and a value lane V's.
 */
import { ROPE_ROWS } from '../generated/params.js';
import type { RopeRowsParams, RopeRowsRanges } from '../generated/params.js';
import { CALL_REJECTED, ENTRY_BUILTINS, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import { FP8_WGSL } from './fp8.wgsl.js';
import { poolRowWgsl, poolVectorType, scaleBitsWgsl, storeRowVectors } from './kvPoolRows.wgsl.js';
import { tuning } from './plan.js';
import type { RopeRowsPlan } from './plan.js';
import { halfStorer, packVector, rotateVector, rowElementReader, storeElement, vectorType, vectorValues } from './rowCode.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export function ropeRowsShader(plan: RopeRowsPlan): KernelSource<RopeRowsParams, RopeRowsRanges> {
  const { layout, R, dtype } = plan;
  const element = layout.access === 'element';
  const halves = element && dtype !== 'f32';
  const rowType = element ? 'u32' : vectorType(layout);
  const withQ = plan.kind !== 'kv';
  const withK = plan.kind !== 'q';
  const dstType = halves ? 'atomic<u32>' : rowType;
  const fp8 = plan.pool?.fp8;
  const bindings = ROPE_ROWS.bindings({ queries: withQ, keys: withK, Row: rowType, Dst: dstType, Pool: poolVectorType(layout, dstType, fp8) });
  const valueLanes = plan.valueLanes;
  const exact = plan.pool?.fp8Exact ?? tuning.fp8Exact;
  /** The statement storing row vectors (the model dtype's words) into the pools at the slot, if it is one: as they are, or as their fp8 codes (one store, so the exact fallback is compiled once for all of them). */
  const toPools = (stores: readonly (readonly ['kPool' | 'vPool', string, string])[]): string =>
    `if (slotOk) { ${storeRowVectors(fp8, dtype, layout, stores.map(([pool, index, vector]) => ({ target: `${pool}[${index}]`, vector, scale: `${pool[0]}ScaleBits` })), exact)} }`;
  /** The V vector at `index` of this lane's row, where this lane stores V: every key lane, unless V rows have lanes of their own. */
  const withValue = (index: string): (readonly ['vPool', string, string])[] => (valueLanes ? [] : [['vPool', `poolBase + ${index}`, `v[vBase + ${index}]`]]);
  /** The slot of a key (or value) row: the token's check, and where its head row starts in the pools (and the fp8 scales of its head). */
  const slotLines = (parts: readonly ('k' | 'v')[]): string[] => [
    'let slot = slotAt(n);',
    'let slotOk = indexBelow(slot, params.slotBelow);',
    'let poolBase = poolRow(select(0u, slot.x, slotOk), h, params.keyHeads, params.pageSize) * ROW_VECS;',
    ...(fp8 ? [scaleBitsWgsl(parts, 'h', (i) => `bitcast<u32>(cosSin[${i}])`)] : []),
  ];
  const keyParts = valueLanes ? (['k'] as const) : (['k', 'v'] as const);

  /** Where this invocation's head row starts in each input it reads, in row vectors: inputs may be views (strides as uniforms). */
  const inputBases = (src: 'q' | 'k', isKey: boolean): string[] => [
    `let srcBase = params.${src}Offset + n * params.${src}TokenStride + h * params.${src}HeadStride;`,
    ...(isKey && !valueLanes ? ['let vBase = params.vOffset + n * params.vTokenStride + h * params.vHeadStride;'] : []),
  ];

  /** The statements of one part: rotate this invocation's vector of `src` into `dst` (and the pools for keys). */
  const part = (src: 'q' | 'k', dst: 'qRot' | 'kRot', heads: string): string => {
    const isKey = src === 'k';
    const p = `${src}_`;
    const xs = vectorValues(dtype, layout, 'x');
    const rotation = rotateVector({
      style: plan.style,
      partner: plan.partner,
      layout,
      R,
      values: xs.map((_, k) => `${p}y${k}`),
      vector: 'c',
      prefix: p,
      partnerValue: (i, out) => `let ${out} = ${src}At(elemBase + ${i});`,
      partnerVector: (vector, prefix) => ({ code: `let ${prefix}raw = ${src}[srcBase + ${vector}];`, values: vectorValues(dtype, layout, `${prefix}raw`) }),
      cosSin: (j, which) => `cosSin[csBase + ${which === 0 ? '' : `${R / 2}u + `}${j}]`,
    });
    const lines = [
      `let base = (n * ${heads} + h) * ROW_VECS;`,
      ...inputBases(src, isKey),
      `let elemBase = srcBase * ${layout.elements}u;`,
      element ? `let x = ${src}At(srcBase + c);` : `let x = ${src}[srcBase + c];`,
      ...xs.map((x, k) => `let ${p}y${k} = ${x};`),
      rotation.code,
    ];
    if (isKey) lines.push(...slotLines(keyParts));
    if (element) {
      lines.push(storeElement(dtype, dst, `store_${dst}`, 'base + c', rotation.out[0]!));
      if (isKey) {
        const e = 'vBase + c';
        lines.push(
          'if (slotOk) {',
          `  ${storeElement(dtype, 'kPool', 'store_kPool', 'poolBase + c', rotation.out[0]!)}`,
          dtype === 'f32' ? '  vPool[poolBase + c] = v[vBase + c];' : `  store_vPool(poolBase + c, v[(${e}) >> 1u] >> (((${e}) & 1u) * 16u));`,
          '}',
        );
      }
    } else {
      lines.push(`let packed = ${packVector(dtype, layout, rotation.out)};`, `${dst}[base + c] = packed;`);
      if (isKey) lines.push(toPools([['kPool', 'poolBase + c', 'packed'], ...withValue('c')]));
    }
    return lines.join('\n    ');
  };

  /**
   * Pair layout (neox with R/2 a whole number of vectors): an invocation owns
   * a vector and its rotation partner R/2 elements on, loads each once and
   * reads their shared cos/sin once; past R, a vector is copied as it is.
   */
  const pairPart = (src: 'q' | 'k', dst: 'qRot' | 'kRot', heads: string): string => {
    const isKey = src === 'k';
    const E = layout.elements;
    const halfVecs = R / 2 / E;
    const xs = vectorValues(dtype, layout, 'x');
    const ps = vectorValues(dtype, layout, 'xp');
    const lines = [
      `let base = (n * ${heads} + h) * ROW_VECS;`,
      ...inputBases(src, isKey),
      `let paired = u < ${halfVecs}u;`,
      `let c = select(${R / E}u + u - ${halfVecs}u, u, paired);`,
      `let x = ${src}[srcBase + c];`,
    ];
    if (isKey) lines.push(...slotLines(keyParts));
    const rotate = [
      `let pc = c + ${halfVecs}u;`,
      `let xp = ${src}[srcBase + pc];`,
      `let j0 = csBase + c * ${E}u;`,
      ...xs.flatMap((_, k) => [`let cs${k} = cosSin[j0 + ${k}u];`, `let sn${k} = cosSin[j0 + ${R / 2 + k}u];`]),
      `let lo = ${packVector(dtype, layout, xs.map((x, k) => `${x} * cs${k} - ${ps[k]} * sn${k}`))};`,
      `let hi = ${packVector(dtype, layout, xs.map((x, k) => `${ps[k]} * cs${k} + ${x} * sn${k}`))};`,
      `${dst}[base + c] = lo;`,
      `${dst}[base + pc] = hi;`,
      ...(isKey ? [toPools([['kPool', 'poolBase + c', 'lo'], ['kPool', 'poolBase + pc', 'hi'], ...withValue('c'), ...withValue('pc')])] : []),
    ];
    const copy = [`${dst}[base + c] = x;`, ...(isKey ? [toPools([['kPool', 'poolBase + c', 'x'], ...withValue('c')])] : [])];
    // R = D: every lane holds a pair (u < R/2/E always), so no copy branch is built.
    lines.push(R === plan.D ? `{\n      ${rotate.join('\n      ')}\n    }` : `if (paired) {\n      ${rotate.join('\n      ')}\n    } else {\n      ${copy.join('\n      ')}\n    }`);
    return lines.join('\n    ');
  };
  /**
   * A V row on lanes of its own (valueLanes): the lane's V vectors into vPool,
   * the pair layout's two (a vector and the one R/2 elements on) or one.
   */
  const valuePart = (): string => {
    const lines = ['let vBase = params.vOffset + n * params.vTokenStride + h * params.vHeadStride;', ...slotLines(['v'])];
    if (!plan.pairs) return [...lines, toPools([['vPool', 'poolBase + c', 'v[vBase + c]']])].join('\n    ');
    const halfVecs = R / 2 / layout.elements;
    lines.push(
      `let paired = u < ${halfVecs}u;`,
      `let c = select(${R / layout.elements}u + u - ${halfVecs}u, u, paired);`,
      `let pc = c + ${halfVecs}u;`,
      R === plan.D
        ? toPools([['vPool', 'poolBase + c', 'v[vBase + c]'], ['vPool', 'poolBase + pc', 'v[vBase + pc]']])
        : `if (paired) {
      ${toPools([['vPool', 'poolBase + c', 'v[vBase + c]'], ['vPool', 'poolBase + pc', 'v[vBase + pc]']])}
    } else {
      ${toPools([['vPool', 'poolBase + c', 'v[vBase + c]']])}
    }`,
    );
    return lines.join('\n    ');
  };
  const body = plan.pairs ? pairPart : part;
  const units = plan.pairs ? R / 2 / layout.elements + (plan.D - R) / layout.elements : layout.rowVecs;
  // Rows of a token: its query heads (kind 'all'), key heads, and (valueLanes) value heads.
  const keyRows = valueLanes ? '2u * params.keyHeads' : 'params.keyHeads';
  const keyOrValue = valueLanes
    ? (unit: string) => `if (${unit} < params.keyHeads) {
    let h = ${unit};
    ${body('k', 'kRot', 'params.keyHeads')}
  } else {
    let h = ${unit} - params.keyHeads;
    ${valuePart()}
  }`
    : (unit: string) => `{
    let h = ${unit};
    ${body('k', 'kRot', 'params.keyHeads')}
  }`;

  const storers = halves ? [...(withQ ? ['qRot'] : []), ...(withK ? ['kRot', 'kPool', 'vPool'] : [])].map((a) => halfStorer(`store_${a}`, a)) : [];
  const dispatch =
    plan.kind === 'all'
      ? `let unitsPerToken = params.queryHeads + ${keyRows};
  let n = row / unitsPerToken;
  let csBase = n * ${R}u;
  let unit = row % unitsPerToken;
  if (unit < params.queryHeads) {
    let h = unit;
    ${body('q', 'qRot', 'params.queryHeads')}
  } else ${keyOrValue('(unit - params.queryHeads)')}`
      : plan.kind === 'q'
        ? `let n = row / params.queryHeads;
  let csBase = n * ${R}u;
  let h = row % params.queryHeads;
  {
    ${body('q', 'qRot', 'params.queryHeads')}
  }`
        : `let n = row / (${keyRows});
  let csBase = n * ${R}u;
  let unit = row % (${keyRows});
  ${keyOrValue('unit')}`;

  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? FP8_WGSL : ''}
${ROPE_ROWS.uniformsWgsl}
${bindings.wgsl}
${withK ? poolRowWgsl(plan.pool?.layout ?? 'NHD') : ''}
${withQ ? rowElementReader('qAt', 'q', dtype, layout) : ''}
${withK ? rowElementReader('kAt', 'k', dtype, layout) : ''}
${withK ? indexReader('slotAt', 'slots', plan.slotType ?? 'i32') : ''}
${storers.join('\n')}

const ROW_VECS = ${layout.rowVecs}u;
/** Invocations per head row: one per vector, or (pair layout) one per rotation pair plus one per vector past R. */
const UNITS = ${units}u;

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  let row = id / UNITS;
  if (row >= params.rows${withK ? ` || ${CALL_REJECTED}` : ''}) { return; }
  let u = id % UNITS;
  let c = u;
  ${dispatch}
}
`;
  return kernelSource(ROPE_ROWS, bindings, code);
}
