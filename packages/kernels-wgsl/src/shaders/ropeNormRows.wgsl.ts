/**
 * ropePoolFused with a Q/K-norm (SEMANTICS.md §3): RMSNorm of each query and
 * key head row over D (x · inv · weight, where that part has a weight), then
 * RoPE, the keys also into kPool and the values copied into vPool at their
 * slots (either pool layout; fp8 codes of x / scale for fp8 pools, whole
 * words per lane since D is a multiple of 4 there, the scales after the
 * cos/sin rows). A group of `lanesPerRow` invocations owns one head row, as
 * in the norm + RoPE kernel: each lane loads whole vectors once, the partial
 * sums of squares meet through subgroup shuffles or workgroup memory, and
 * each lane norms, rotates and writes its own vectors. With neox over the whole row (R = D), a lane
 * holds a vector and its rotation partner (paired lanes), so nothing is read twice. cos/sin come from the per-token
 * table (ropeTable.wgsl.ts). Negative slots skip a token; a slot at or past
 * the pool rejected the call (its check raised the slot's flag word, which
 * the key rows read first, and write nothing). q, k and v may be
 * views: each row is found through their offsets and token and head strides.
 *
 * Every part in one dispatch where the device has the bindings; else q, k and
 * v rows in three (each within WebGPU's default eight storage bindings).
 */
import type { FloatDType } from '@kvkit/contracts';
import { ROPE_NORM_ROWS } from '../generated/params.js';
import type { RopeNormRowsParams, RopeNormRowsRanges } from '../generated/params.js';
import { CALL_REJECTED, elementReader, ENTRY_BUILTINS, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP, wordValues } from './common.wgsl.js';
import { FP8_WGSL } from './fp8.wgsl.js';
import { poolRowWgsl, poolVectorType, scaleBitsWgsl, storeRowVector } from './kvPoolRows.wgsl.js';
import type { RopeNormRowsPlan } from './plan.js';
import { halfStorer, laneSumCode, packVector, rotateVector, rowElementReader, storeElement, vectorType, vectorValues } from './rowCode.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export function ropeNormRowsShader(plan: RopeNormRowsPlan): KernelSource<RopeNormRowsParams, RopeNormRowsRanges> {
  const { layout, D, R, dtype, queries, keys, values } = plan;
  const G = plan.lanesPerRow;
  const E = layout.elements;
  const element = layout.access === 'element';
  const halves = element && dtype !== 'f32';
  const rowType = element ? 'u32' : vectorType(layout);
  const queryNorm = queries && plan.queryWeight !== undefined;
  const keyNorm = keys && plan.keyWeight !== undefined;
  const pool = keys || values;
  const fp8 = plan.pool?.fp8;
  const dstType = halves ? 'atomic<u32>' : rowType;
  // The fp8 scales follow the cos/sin rows: a value-only part reads that binding for them.
  const rotates = queries || keys || (values && fp8 !== undefined);
  const bindings = ROPE_NORM_ROWS.bindings({ queries, queryNorm, keys, keyNorm, values, rotates, pool, Row: rowType, Dst: dstType, Pool: poolVectorType(layout, dstType, fp8) });
  /** The statement storing row vector `vector` (the model dtype's words) into a pool at the slot: as it is, or as its fp8 codes. */
  const toPool = (name: 'kPool' | 'vPool', index: string, vector: string): string => `if (slotOk) { ${storeRowVector(fp8, dtype, layout, `${name}[${index}]`, vector, `${name[0]}ScaleBits`)} }`;
  const poolParts = [...(keys ? ['k' as const] : []), ...(values ? ['v' as const] : [])];
  const vecs = Array.from({ length: plan.vecsPerLane }, (_, v) => v);
  const zero = element ? '0.0' : `${rowType}()`;
  // A row is a query row where queries run and the unit is below Hq; else a key (or value) row.
  const rowIsQuery = !queries ? 'false' : !pool ? 'true' : 'unit < params.queryHeads';

  const loads = vecs
    .map((v) => {
      const c = `c${v}`;
      const read = (src: 'q' | 'k') => (element ? `${src}At(elemBase + ${c})` : `${src}[srcBase + ${c}]`);
      // Each row reads only its own tensor: a query row's index may lie past the end of k.
      const pick = queries && keys ? `if (isQuery) { x${v} = ${read('q')}; } else { x${v} = ${read('k')}; }` : queries ? `x${v} = ${read('q')};` : keys ? `x${v} = ${read('k')};` : '';
      return [`let ${c} = laneInRow + ${v * G}u;`, `let a${v} = live && ${c} < ROW_VECS;`, `var x${v} = ${zero};`, ...(pick ? [`if (a${v}) { ${pick} }`] : [])].join('\n  ');
    })
    .join('\n  ');
  const squares = queryNorm || keyNorm ? vecs.flatMap((v) => vectorValues(dtype, layout, `x${v}`).map((x) => `sumSquares = fma(${x}, ${x}, sumSquares);`)).join('\n  ') : '';

  /** Norm (where `weight` is given), rotate and store one vector of a query or key row; keys also go to the pools. */
  const rotated = (v: number, src: 'q' | 'k', weight: string | undefined): string => {
    const isKey = src === 'k';
    const dst = isKey ? 'kRot' : 'qRot';
    const p = `${src}${v}_`;
    const scale = (i: string) => (weight ? ` * inv * ${weight}(${i})` : '');
    const xs = vectorValues(dtype, layout, `x${v}`);
    const lines = xs.map((x, k) => `let ${p}y${k} = ${x}${scale(`c${v} * ${E}u + ${k}u`)};`);
    const rotation = rotateVector({
      style: plan.style,
      partner: plan.partner,
      layout,
      R,
      values: xs.map((_, k) => `${p}y${k}`),
      vector: `c${v}`,
      prefix: p,
      partnerValue: (i, out) => `let ${out} = ${src}At(elemBase + ${i})${scale(i)};`,
      partnerVector: (vector, prefix) => {
        const raw = vectorValues(dtype, layout, `${prefix}raw`);
        return {
          code: [`let ${prefix}raw = ${src}[srcBase + ${vector}];`, ...raw.map((x, k) => `let ${prefix}${k} = ${x}${scale(`${vector} * ${E}u + ${k}u`)};`)].join('\n    '),
          values: raw.map((_, k) => `${prefix}${k}`),
        };
      },
      cosSin: (j, which) => `cosSin[csBase + ${which === 0 ? '' : `${R / 2}u + `}${j}]`,
    });
    lines.push(rotation.code);
    if (element) {
      lines.push(storeElement(dtype, dst, `store_${dst}`, `base + c${v}`, rotation.out[0]!));
      if (isKey) lines.push(`if (slotOk) { ${storeElement(dtype, 'kPool', 'store_kPool', `poolBase + c${v}`, rotation.out[0]!)} }`);
    } else {
      lines.push(`let ${p}packed = ${packVector(dtype, layout, rotation.out)};`, `${dst}[base + c${v}] = ${p}packed;`);
      if (isKey) lines.push(toPool('kPool', `poolBase + c${v}`, `${p}packed`));
    }
    return lines.join('\n    ');
  };
  /** A weight's values for vector `vector` of a row, read a word at a time (the row's own layout of elements). */
  const weightValues = (array: 'qWeight' | 'kWeight', dtype: FloatDType, vector: string): string[] => {
    const perWord = dtype === 'f32' ? 1 : 2;
    return Array.from({ length: E / perWord }, (_, m) => wordValues(dtype, `${array}[${vector} * ${E / perWord}u + ${m}u]`)).flat();
  };
  /**
   * Paired lanes: vector c0 of the row's first half and its partner c1 = c0 + R/2 elements on, normed
   * (where `weight` names a weight), rotated with one read of their shared cos/sin, and stored.
   */
  const rotatedPair = (src: 'q' | 'k', weight: { array: 'qWeight' | 'kWeight'; dtype: FloatDType } | undefined): string => {
    const isKey = src === 'k';
    const dst = isKey ? 'kRot' : 'qRot';
    const p = `${src}_`;
    const normed = (v: number) => {
      const xs = vectorValues(dtype, layout, `x${v}`);
      const ws = weight ? weightValues(weight.array, weight.dtype, `c${v}`) : [];
      return xs.map((x, k) => `let ${p}${v === 0 ? 'y' : 'z'}${k} = ${x}${weight ? ` * inv * ${ws[k]}` : ''};`);
    };
    const ks = Array.from({ length: E }, (_, k) => k);
    const lines = [
      ...normed(0),
      ...normed(1),
      `let ${p}j = csBase + c0 * ${E}u;`,
      ...ks.flatMap((k) => [`let ${p}c${k} = cosSin[${p}j + ${k}u];`, `let ${p}s${k} = cosSin[${p}j + ${R / 2 + k}u];`]),
      `let ${p}lo = ${packVector(dtype, layout, ks.map((k) => `${p}y${k} * ${p}c${k} - ${p}z${k} * ${p}s${k}`))};`,
      `let ${p}hi = ${packVector(dtype, layout, ks.map((k) => `${p}z${k} * ${p}c${k} + ${p}y${k} * ${p}s${k}`))};`,
      `${dst}[base + c0] = ${p}lo;`,
      `${dst}[base + c1] = ${p}hi;`,
    ];
    if (isKey) lines.push(toPool('kPool', 'poolBase + c0', `${p}lo`), toPool('kPool', 'poolBase + c1', `${p}hi`));
    return lines.join('\n    ');
  };
  /** The value row's vector v, copied bit for bit into vPool at the slot. */
  const copied = (v: number): string => {
    if (!element || dtype === 'f32') return toPool('vPool', `poolBase + c${v}`, `v[vBase + c${v}]`);
    const e = `(vBase + c${v})`;
    return `if (slotOk) { store_vPool(poolBase + c${v}, v[${e} >> 1u] >> ((${e} & 1u) * 16u)); }`;
  };
  const pairedWrites = (): string => {
    const q = queries ? rotatedPair('q', queryNorm ? { array: 'qWeight', dtype: plan.queryWeight! } : undefined) : '';
    const k = [keys ? rotatedPair('k', keyNorm ? { array: 'kWeight', dtype: plan.keyWeight! } : undefined) : '', ...(values ? vecs.map(copied) : [])].filter(Boolean).join('\n    ');
    const body = queries && pool ? `if (isQuery) {\n    ${q}\n  } else {\n    ${k}\n  }` : queries ? q : k;
    // Both vectors of a pair lie in the row: a0 holds for c1 too.
    return `if (a0) {\n    ${body}\n  }`;
  };
  const writes = plan.pairedLanes ? pairedWrites() : vecs
    .map((v) => {
      const q = queries ? rotated(v, 'q', queryNorm ? 'qWeightAt' : undefined) : '';
      const k = [keys ? rotated(v, 'k', keyNorm ? 'kWeightAt' : undefined) : '', values ? copied(v) : ''].filter(Boolean).join('\n    ');
      const body = queries && pool ? `if (isQuery) {\n    ${q}\n  } else {\n    ${k}\n  }` : queries ? q : k;
      return `if (a${v}) {\n    ${body}\n  }`;
    })
    .join('\n  ');

  const slotCode = pool
    ? `let slot = slotAt(n);
  let slotOk = !isQuery && indexBelow(slot, params.slotBelow);
  let poolBase = poolRow(select(0u, slot.x, slotOk), h, params.keyHeads, params.pageSize) * ROW_VECS;${fp8 ? `\n  ${scaleBitsWgsl(poolParts, 'select(0u, h, slotOk)', (i) => `bitcast<u32>(cosSin[${i}])`)}` : ''}`
    : '';
  const storers = halves ? [...(queries ? ['qRot'] : []), ...(keys ? ['kRot', 'kPool'] : []), ...(values ? ['vPool'] : [])].map((a) => halfStorer(`store_${a}`, a)) : [];
  // Inputs may be views (strides as uniforms): where this row starts in the tensors it reads, in row vectors.
  const rowStart = (src: 'q' | 'k' | 'v') => `params.${src}Offset + n * params.${src}TokenStride + h * params.${src}HeadStride`;
  const rotatedStart = queries && keys ? `select(${rowStart('k')}, ${rowStart('q')}, isQuery)` : queries ? rowStart('q') : rowStart('k');
  const inputBases = [
    ...(queries || keys ? [`let srcBase = ${rotatedStart};`, `let elemBase = srcBase * ${E}u;`] : []),
    ...(values ? [`let vBase = ${rowStart('v')};`] : []),
  ].join('\n  ');
  const headsPerToken = [queries ? 'params.queryHeads' : '', pool ? 'params.keyHeads' : ''].filter(Boolean).join(' + ');

  const code = `${plan.reduction === 'subgroup' && squares ? 'enable subgroups;\n' : ''}${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? FP8_WGSL : ''}
${ROPE_NORM_ROWS.uniformsWgsl}
${bindings.wgsl}
${pool ? poolRowWgsl(plan.pool?.layout ?? 'NHD') : ''}
${queries ? rowElementReader('qAt', 'q', dtype, layout) : ''}
${keys ? rowElementReader('kAt', 'k', dtype, layout) : ''}
${queryNorm ? elementReader('qWeightAt', 'qWeight', plan.queryWeight!) : ''}
${keyNorm ? elementReader('kWeightAt', 'kWeight', plan.keyWeight!) : ''}
${pool ? indexReader('slotAt', 'slots', plan.slotType ?? 'i32') : ''}
${storers.join('\n')}

const ROW_VECS = ${layout.rowVecs}u;
const ROWS_PER_GROUP = ${plan.workgroupSize / G}u;
${plan.reduction === 'workgroup' && squares ? `var<workgroup> partial: array<f32, ${plan.workgroupSize}>;` : ''}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let laneInRow = lane % ${G}u;
  let row = linearWorkgroup * ROWS_PER_GROUP + lane / ${G}u;
  let live = row < params.rows${keys ? ` && !${CALL_REJECTED}` : ''};
  let r = select(0u, row, live);
  let n = r / (${headsPerToken});
  let unit = r % (${headsPerToken});
  let isQuery = ${rowIsQuery};
  let h = select(unit${queries && pool ? ' - params.queryHeads' : ''}, unit, isQuery);
  let base = select((n * params.keyHeads + h) * ROW_VECS, (n * params.queryHeads + h) * ROW_VECS, isQuery);
  ${inputBases}
  let csBase = n * ${R}u;
  ${slotCode}
  ${loads}
  var sumSquares = 0.0;
  ${squares}
  ${squares ? laneSumCode(plan.reduction, G, 'sumSquares') : ''}
  let inv = inverseSqrt(sumSquares / ${D}.0 + params.eps);
  ${writes}
}
`;
  return kernelSource(ROPE_NORM_ROWS, bindings, code);
}
