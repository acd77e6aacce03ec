/**
 * mlaPoolFused in WGSL (docs: ops/mlaPoolFused). Part 'latent': a group of
 * `lanesPerRow` invocations per token loads its latent row once (C + R
 * values, in 16-byte vectors where C and R are whole vectors), adds the
 * squares of the first C through subgroup shuffles or workgroup memory, and
 * each lane writes its vectors: x · inv · w for the first C, RoPE for the last
 * R (cos/sin from the per-token table, ropeTable.wgsl.ts), rounded once to the
 * model dtype, into the pool row of the token's owned slot (with one head,
 * slot s is row s in both layouts), or as fp8 codes of x / scale. Where fp8
 * codes of a vector would share words (vectors of fewer than four values),
 * the rows go dense to row n instead and the pool pass stores them. A slot at
 * or past the pool rejected the call: its flag word is read first, and
 * nothing is written. Part 'queries': an invocation per vector of a query
 * row, copied, or rotated where it lies in the last R values.
 */
import type { FloatDType, Fp8DType, IndexDType } from '@kvkit/contracts';
import { MLA_ROWS } from '../generated/params.js';
import type { MlaRowsParams, MlaRowsRanges } from '../generated/params.js';
import { CALL_REJECTED, elementBytes, elementReader, ENTRY_BUILTINS, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import { FP8_WGSL } from './fp8.wgsl.js';
import { poolVectorType, storeRowVector } from './kvPoolRows.wgsl.js';
import { partnerMode } from './plan.js';
import type { DeviceCaps, PartnerMode, RopeStyle, RowLayout } from './plan.js';
import { halfStorer, laneSumCode, packVector, rotateVector, rowElementReader, storeElement, vectorType, vectorValues } from './rowCode.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

interface MlaCommon {
  readonly kernel: 'mlaRows';
  readonly f16: F16Conversion;
  readonly dtype: FloatDType;
  readonly R: number;
  readonly style: RopeStyle;
  /** The unit rows are read and written in: whole vectors of both parts of a row, or single elements. */
  readonly layout: RowLayout;
  readonly partner: PartnerMode;
}

export interface MlaLatentPlan extends MlaCommon {
  readonly part: 'latent';
  readonly C: number;
  readonly weightType: FloatDType;
  /** The owned slots' dtype; undefined: rows go dense to row n (fp8 codes that would share words). */
  readonly slotType: IndexDType | undefined;
  readonly fp8: Fp8DType | undefined;
  readonly lanesPerRow: number;
  readonly vecsPerLane: number;
  readonly reduction: 'none' | 'subgroup' | 'workgroup';
  readonly workgroupSize: number;
}

export interface MlaQueriesPlan extends MlaCommon {
  readonly part: 'queries';
  readonly Dq: number;
  readonly workgroupSize: number;
}

export type MlaRowsPlan = MlaLatentPlan | MlaQueriesPlan;

/** Lanes of a latent row at most: past it a lane takes several vectors. */
const MAX_LANES_PER_ROW = 32;
const LATENT_WORKGROUP = 128;
const QUERY_WORKGROUP = 256;

function nextPowerOfTwo(n: number): number {
  let p = 1;
  while (p < n) p *= 2;
  return p;
}

/**
 * The widest unit (4, 2 or 1 words) whose elements divide every part of a row (its latent and RoPE
 * parts, or a query head's copied and rotated parts) and every stride it is read through; element access
 * where a 16-bit part is odd.
 */
export function mlaLayout(dtype: FloatDType, parts: readonly number[], rowElements: number, fits: (elements: number) => boolean): RowLayout {
  const b = elementBytes(dtype);
  for (const vecWords of [4, 2, 1] as const) {
    const elements = (vecWords * 4) / b;
    if (parts.every((p) => p % elements === 0) && fits(elements)) return { access: 'vector', vecWords, elements, rowVecs: rowElements / elements };
  }
  return { access: 'element', vecWords: 1, elements: 1, rowVecs: rowElements };
}

/** Whether fp8 codes of one row vector fill whole words (four values or more): else the rows go through the pool pass. */
export const fp8VectorsFit = (layout: RowLayout): boolean => layout.access === 'vector' && layout.elements >= 4;

export function planMlaLatent(caps: DeviceCaps, r: Omit<MlaLatentPlan, 'kernel' | 'f16' | 'part' | 'partner' | 'lanesPerRow' | 'vecsPerLane' | 'reduction' | 'workgroupSize'>): MlaLatentPlan {
  const lanesPerRow = Math.min(nextPowerOfTwo(r.layout.rowVecs), MAX_LANES_PER_ROW);
  const reduction = lanesPerRow === 1 ? 'none' : caps.subgroups && lanesPerRow <= caps.subgroupMinSize ? 'subgroup' : 'workgroup';
  return {
    ...r,
    kernel: 'mlaRows',
    f16: caps.f16,
    part: 'latent',
    partner: partnerMode(r.style, r.R, r.layout),
    lanesPerRow,
    vecsPerLane: Math.ceil(r.layout.rowVecs / lanesPerRow),
    reduction,
    workgroupSize: Math.max(lanesPerRow, Math.min(LATENT_WORKGROUP, caps.maxInvocationsPerWorkgroup)),
  };
}

export function planMlaQueries(caps: DeviceCaps, r: Omit<MlaQueriesPlan, 'kernel' | 'f16' | 'part' | 'partner' | 'workgroupSize'>): MlaQueriesPlan {
  return { ...r, kernel: 'mlaRows', f16: caps.f16, part: 'queries', partner: partnerMode(r.style, r.R, r.layout), workgroupSize: Math.min(QUERY_WORKGROUP, caps.maxInvocationsPerWorkgroup) };
}

/** Tokens one workgroup of the latent part covers. */
export function mlaTokensPerWorkgroup(plan: MlaLatentPlan): number {
  return plan.workgroupSize / plan.lanesPerRow;
}

/** WGSL statements rotating vector `rr` of a row's RoPE part (values `xs`), partners read through `read` / `readAt`; returns the rotated values. */
function ropeVector(plan: MlaRowsPlan, xs: readonly string[], rr: string, prefix: string, read: (vector: string) => string, readAt: (i: string) => string): { code: string; out: string[] } {
  const { R, dtype, layout } = plan;
  return rotateVector({
    style: plan.style,
    partner: plan.partner,
    layout,
    R,
    values: xs,
    vector: rr,
    prefix,
    partnerValue: (i, out) => `let ${out} = ${readAt(i)};`,
    partnerVector: (vector, p) => {
      const raw = vectorValues(dtype, layout, `${p}raw`);
      return { code: [`let ${p}raw = ${read(vector)};`, ...raw.map((x, k) => `let ${p}${k} = ${x};`)].join('\n    '), values: raw.map((_, k) => `${p}${k}`) };
    },
    cosSin: (j, which) => `cosSin[csBase + ${which === 0 ? '' : `${R / 2}u + `}${j}]`,
  });
}

export function mlaRowsShader(plan: MlaRowsPlan): KernelSource<MlaRowsParams, MlaRowsRanges> {
  return plan.part === 'latent' ? latentShader(plan) : queriesShader(plan);
}

function latentShader(plan: MlaLatentPlan): KernelSource<MlaRowsParams, MlaRowsRanges> {
  const { layout, C, R, dtype, fp8 } = plan;
  const G = plan.lanesPerRow;
  const E = layout.elements;
  const element = layout.access === 'element';
  const halves = element && dtype !== 'f32';
  const scatter = plan.slotType !== undefined;
  const rowType = element ? 'u32' : vectorType(layout);
  const dstType = halves ? 'atomic<u32>' : rowType;
  const bindings = MLA_ROWS.bindings({ latent: true, scatter, queries: false, Row: rowType, Dst: dstType, Pool: poolVectorType(layout, dstType, fp8) });
  const vecs = Array.from({ length: plan.vecsPerLane }, (_, v) => v);
  const zero = element ? '0.0' : `${rowType}()`;
  const normVecs = C / E;
  const loads = vecs
    .map((v) => [`let c${v} = laneInRow + ${v * G}u;`, `let a${v} = live && c${v} < ROW_VECS;`, `var x${v} = ${zero};`, `if (a${v}) { x${v} = ${element ? `latentAt(elemBase + c${v})` : `latent[srcBase + c${v}]`}; }`].join('\n  '))
    .join('\n  ');
  // Only the latent part's squares: a lane's vectors past it add zeros.
  const squares = vecs
    .map((v) => `if (c${v} < NORM_VECS) {\n    ${vectorValues(dtype, layout, `x${v}`).map((x) => `sumSquares = fma(${x}, ${x}, sumSquares);`).join('\n    ')}\n  }`)
    .join('\n  ');
  const store = (v: number, values: readonly string[], p: string): string[] => {
    if (element) return [storeElement(dtype, 'pool', 'store_pool', `dstBase + c${v}`, values[0]!)];
    return [`let ${p}packed = ${packVector(dtype, layout, values)};`, storeRowVector(fp8, dtype, layout, `pool[dstBase + c${v}]`, `${p}packed`, 'scaleBits')];
  };
  const writes = vecs
    .map((v) => {
      const p = `l${v}_`;
      const xs = vectorValues(dtype, layout, `x${v}`);
      const normed = xs.map((x, k) => `let ${p}y${k} = ${x} * inv * weightAt(c${v} * ${E}u + ${k}u);`);
      const rope = ropeVector(plan, xs, `(c${v} - NORM_VECS)`, `${p}r`, (vector) => `latent[srcBase + NORM_VECS + ${vector}]`, (i) => `latentAt(elemBase + ${C}u + ${i})`);
      return `if (a${v} && writes) {
    if (c${v} < NORM_VECS) {
      ${[...normed, ...store(v, xs.map((_, k) => `${p}y${k}`), `${p}n`)].join('\n      ')}
    } else {
      ${rope.code}
      ${store(v, rope.out, `${p}o`).join('\n      ')}
    }
  }`;
    })
    .join('\n  ');
  const code = `${plan.reduction === 'subgroup' ? 'enable subgroups;\n' : ''}${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? FP8_WGSL : ''}
${MLA_ROWS.uniformsWgsl}
${bindings.wgsl}
${rowElementReader('latentAt', 'latent', dtype, layout)}
${elementReader('weightAt', 'weight', plan.weightType)}
${scatter ? indexReader('slotAt', 'slots', plan.slotType!) : ''}
${halves ? halfStorer('store_pool', 'pool') : ''}

const ROW_VECS = ${layout.rowVecs}u;
const NORM_VECS = ${normVecs}u;
const ROWS_PER_GROUP = ${plan.workgroupSize / G}u;
${plan.reduction === 'workgroup' ? `var<workgroup> partial: array<f32, ${plan.workgroupSize}>;` : ''}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let laneInRow = lane % ${G}u;
  let row = linearWorkgroup * ROWS_PER_GROUP + lane / ${G}u;
  let live = row < params.rows${scatter ? ` && !${CALL_REJECTED}` : ''};
  let n = select(0u, row, live);
  let srcBase = params.latentOffset + n * params.latentTokenStride;
  let elemBase = srcBase * ${E}u;
  let csBase = n * ${R}u;
  ${scatter ? `let slot = slotAt(n);
  let writes = live && indexBelow(slot, params.slotBelow);
  let dstBase = select(0u, slot.x, writes) * ROW_VECS;` : `let writes = live;
  let dstBase = n * ROW_VECS;`}
  ${fp8 ? 'let scaleBits = bitcast<u32>(cosSin[params.scaleAt]);' : ''}
  ${loads}
  var sumSquares = 0.0;
  ${squares}
  ${laneSumCode(plan.reduction, G, 'sumSquares')}
  let inv = inverseSqrt(sumSquares / ${C}.0 + params.eps);
  ${writes}
}
`;
  return kernelSource(MLA_ROWS, bindings, code);
}

function queriesShader(plan: MlaQueriesPlan): KernelSource<MlaRowsParams, MlaRowsRanges> {
  const { layout, R, Dq, dtype } = plan;
  const E = layout.elements;
  const element = layout.access === 'element';
  const halves = element && dtype !== 'f32';
  const rowType = element ? 'u32' : vectorType(layout);
  const dstType = halves ? 'atomic<u32>' : rowType;
  const bindings = MLA_ROWS.bindings({ latent: false, scatter: false, queries: true, Row: rowType, Dst: dstType, Pool: dstType });
  const xs = vectorValues(dtype, layout, 'x');
  const rope = ropeVector(plan, xs, '(c - NOPE_VECS)', 'q_', (vector) => `q[srcBase + NOPE_VECS + ${vector}]`, (i) => `qAt(elemBase + ${Dq - R}u + ${i})`);
  const copy = element
    ? dtype === 'f32'
      ? 'qRot[dst] = q[srcBase + c];'
      : 'let e = srcBase + c;\n    store_qRot(dst, q[e >> 1u] >> ((e & 1u) * 16u));'
    : 'qRot[dst] = q[srcBase + c];';
  const rotated = element ? storeElement(dtype, 'qRot', 'store_qRot', 'dst', rope.out[0]!) : `qRot[dst] = ${packVector(dtype, layout, rope.out)};`;
  const code = `${halfFloatWgsl(plan.f16)}
${MLA_ROWS.uniformsWgsl}
${bindings.wgsl}
${rowElementReader('qAt', 'q', dtype, layout)}
${halves ? halfStorer('store_qRot', 'qRot') : ''}

const ROW_VECS = ${layout.rowVecs}u;
const NOPE_VECS = ${(Dq - R) / E}u;

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  let r = id / ROW_VECS;
  if (r >= params.rows) { return; }
  let c = id % ROW_VECS;
  let n = r / params.queryHeads;
  let h = r % params.queryHeads;
  let srcBase = params.qOffset + n * params.qTokenStride + h * params.qHeadStride;
  let elemBase = srcBase * ${E}u;
  let csBase = n * ${R}u;
  let dst = r * ROW_VECS + c;
  if (c < NOPE_VECS) {
    ${copy}
  } else {
    let x = ${element ? 'qAt(elemBase + c)' : 'q[srcBase + c]'};
    ${rope.code}
    ${rotated}
  }
}
`;
  return kernelSource(MLA_ROWS, bindings, code);
}
