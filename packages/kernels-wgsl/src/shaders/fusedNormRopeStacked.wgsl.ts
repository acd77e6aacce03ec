/**
 * RMSNorm + RoPE of every K head and a bit-exact copy of every V head, for
 * all tokens and layers of a stacked `[T, L, 2*H*D]` input, into `[L, T, H, D]`
 * outputs or, at slots, into pools of either layout, as fp8 codes of x / scale
 * for fp8 pools (whole words per lane: D is a multiple of 4 there), the scales
 * after eps in the weights buffer (SEMANTICS.md §1 and §2).
 *
 * A group of `lanesPerRow` invocations owns one (token, layer, head): each
 * lane loads whole vectors of the K and V rows, the partial sums of squares
 * meet through subgroup shuffles (no barrier) or workgroup memory, and each
 * lane rotates and writes its own vectors. A call whose value check raised
 * one of its flag words (a position or slot out of range, an eps NaN,
 * infinite or negative) writes nothing; a token out of range is skipped all
 * the same, so no access leaves a tensor whatever reaches the kernel.
 */
import { NORM_ROPE } from '../generated/params.js';
import type { NormRopeParams, NormRopeRanges } from '../generated/params.js';
import { CALL_REJECTED, elementReader, ENTRY_BUILTINS, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import { FP8_WGSL } from './fp8.wgsl.js';
import { poolRowWgsl, poolVectorType, scaleBitsWgsl, storeRowVector } from './kvPoolRows.wgsl.js';
import type { NormRopePlan } from './plan.js';
import { halfStorer, laneSumCode, packVector, rotateVector, rowElementReader, storeElement, vectorType, vectorValues } from './rowCode.js';
import { MROPE_STREAM_WGSL } from './ropeTable.wgsl.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/** mRoPE: the height and width positions of token t (at streamStride + t and 2·streamStride + t), kept in bounds as the temporal one is. */
const STREAM_CHECKS = `let position1 = positionAt(params.streamStride + t);
  let position2 = positionAt(2u * params.streamStride + t);
  let position1Ok = indexBelow(position1, params.positionBelow);
  let position2Ok = indexBelow(position2, params.positionBelow);
  let streamsOk = position1Ok && position2Ok;`;

export function normRopeShader(plan: NormRopePlan): KernelSource<NormRopeParams, NormRopeRanges> {
  const { layout, D, R, kvType } = plan;
  const G = plan.lanesPerRow;
  const E = layout.elements;
  const element = layout.access === 'element';
  const scatter = plan.slotType !== undefined;
  const rowType = element ? 'u32' : vectorType(layout);
  const fp8 = plan.pool?.fp8;
  const bindings = NORM_ROPE.bindings({ separateEps: !plan.epsInWeights, scatter, KvRow: rowType, KvDst: poolVectorType(layout, element && kvType !== 'f32' ? 'atomic<u32>' : rowType, fp8) });
  /** The statement storing row vector `vector` (kv's words) at `dst`: as it is, or as its fp8 codes. */
  const toDst = (dst: 'kDst' | 'vDst', vector: string, v: number): string => storeRowVector(fp8, kvType, layout, `${dst}[dBase + c${v}]`, vector, `${dst[0]}ScaleBits`);

  const vecs = Array.from({ length: plan.vecsPerLane }, (_, v) => v);
  const loads = vecs
    .map((v) => {
      const c = `c${v}`;
      return [
        `let ${c} = laneInRow + ${v * G}u;`,
        `let a${v} = live && ${c} < ROW_VECS;`,
        `let ${c}s = select(0u, ${c}, a${v});`,
        element ? `let x${v} = select(0.0, kvAt(kBase + ${c}s), a${v});` : `let x${v} = select(${rowType}(), kv[kBase + ${c}s], a${v});`,
        ...(element ? [] : [`let v${v} = kv[vBase + ${c}s];`]),
      ].join('\n  ');
    })
    .join('\n  ');
  const squares = vecs
    .flatMap((v) => vectorValues(kvType, layout, `x${v}`).map((x) => `sumSquares = fma(${x}, ${x}, sumSquares);`))
    .join('\n  ');

  const reduce = laneSumCode(plan.reduction, G, 'sumSquares');
  // mRoPE over a cache: pair j reads the row of its stream's position (a per-token table already holds it).
  const streamRows = plan.streams && plan.ropeSource === 'cache';
  const cacheRowOf = (j: string) => (streamRows ? `select(select(csBase2, csBase1, mropeStream(${j}) == 1u), csBase, mropeStream(${j}) == 0u)` : 'csBase');
  const streamsOk = plan.streams ? ' && streamsOk' : '';

  const writes = vecs
    .map((v) => {
      const p = `r${v}_`;
      const xs = vectorValues(kvType, layout, `x${v}`);
      const normed = xs.map((_, k) => `${p}y${k}`);
      const lines = xs.map((x, k) => `let ${p}y${k} = ${x} * inv * weightAt(wBase + c${v} * ${E}u + ${k}u);`);
      const rotation = rotateVector({
        style: plan.style,
        partner: plan.partner,
        layout,
        R,
        values: normed,
        vector: `c${v}`,
        prefix: p,
        partnerValue: (i, out) => `let ${out} = kvAt(kElemBase + ${i}) * inv * weightAt(wBase + ${i});`,
        partnerVector: (vector, prefix) => {
          const raw = vectorValues(kvType, layout, `${prefix}raw`);
          return {
            code: [`let ${prefix}raw = kv[kBase + ${vector}];`, ...raw.map((x, k) => `let ${prefix}${k} = ${x} * inv * weightAt(wBase + ${vector} * ${E}u + ${k}u);`)].join('\n    '),
            values: raw.map((_, k) => `${prefix}${k}`),
          };
        },
        cosSin: (j, which) => `cosSinAt(${cacheRowOf(j)} + ${which === 0 ? '' : `${R / 2}u + `}${j})`,
      });
      const store = element
        ? [storeElement(kvType, 'kDst', 'storeK', `dBase + c${v}`, rotation.out[0]!), copyElement(kvType, v)]
        : [toDst('kDst', packVector(kvType, layout, rotation.out), v), toDst('vDst', `v${v}`, v)];
      return `if (ok && a${v}) {\n    ${[...lines, rotation.code, ...store].join('\n    ')}\n  }`;
    })
    .join('\n  ');

  const code = `${plan.reduction === 'subgroup' ? 'enable subgroups;\n' : ''}${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? FP8_WGSL : ''}
${NORM_ROPE.uniformsWgsl}
${bindings.wgsl}
${poolRowWgsl(plan.pool?.layout ?? 'NHD')}
${elementReader('weightAt', 'weights', plan.weightType)}
${elementReader('cosSinAt', 'cosSin', plan.cacheType)}
${streamRows ? MROPE_STREAM_WGSL : ''}
${indexReader('positionAt', 'positions', plan.positionType)}
${scatter ? indexReader('slotAt', 'slots', plan.slotType!) : ''}
${rowElementReader('kvAt', 'kv', kvType, layout)}
${element && kvType !== 'f32' ? `${halfStorer('storeK', 'kDst')}\n${halfStorer('storeV', 'vDst')}` : ''}

const ROW_VECS = ${layout.rowVecs}u;
const ROWS_PER_GROUP = ${plan.workgroupSize / G}u;
${plan.reduction === 'workgroup' ? `var<workgroup> partial: array<f32, ${plan.workgroupSize}>;` : ''}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let laneInRow = lane % ${G}u;
  let row = linearWorkgroup * ROWS_PER_GROUP + lane / ${G}u;
  // Rows past the dispatch's, and every row of a call its value check rejected, load and write nothing.
  let live = row < params.rows && !${CALL_REJECTED};
  let r = select(0u, row, live);
  let h = r % params.heads;
  let tl = r / params.heads;
  let l = tl % params.layers;
  let t = tl / params.layers;
  let position = positionAt(t);
  let positionOk = indexBelow(position, params.positionBelow);
  ${plan.streams ? STREAM_CHECKS : ''}
  let epsBits = ${plan.epsInWeights ? 'weights[params.epsWordOffset + l]' : 'bitcast<u32>(eps[l])'};
  ${
    scatter
      ? `let slot = slotAt(t);
  let slotOk = indexBelow(slot, params.slotBelow);
  let ok = live && positionOk && slotOk${streamsOk};
  let destToken = select(0u, slot.x, slotOk);`
      : `let ok = live && positionOk${streamsOk};
  let destToken = t;`
  }
  let csBase = ${plan.ropeSource === 'cache' ? 'select(0u, position.x, positionOk)' : 't'} * ${R}u;
  ${streamRows ? `let csBase1 = select(0u, position1.x, position1Ok) * ${R}u;\n  let csBase2 = select(0u, position2.x, position2Ok) * ${R}u;` : ''}
  let wBase = l * ${D}u;
  let kRow = (t * params.layers + l) * 2u * params.heads + h;
  let kElemBase = kRow * ${D}u;
  let kBase = kRow * ROW_VECS;
  let vBase = kBase + params.heads * ROW_VECS;
  let dBase = l * params.destLayerStride + poolRow(destToken, h, params.heads, params.pageSize) * ROW_VECS;${fp8 ? `\n  ${scaleBitsWgsl(['k', 'v'], 'h', (i) => `weights[${i}]`)}` : ''}
  ${loads}
  var sumSquares = 0.0;
  ${squares}
  ${reduce}
  let inv = inverseSqrt(sumSquares / ${D}.0 + bitcast<f32>(epsBits));
  ${writes}
}
`;
  return kernelSource(NORM_ROPE, bindings, code);

  function copyElement(dtype: NormRopePlan['kvType'], v: number): string {
    // V is copied as raw bits: the source word's half goes to the destination's half.
    if (dtype === 'f32') return `vDst[dBase + c${v}] = kv[vBase + c${v}];`;
    return `storeV(dBase + c${v}, kv[(vBase + c${v}) >> 1u] >> (((vBase + c${v}) & 1u) * 16u));`;
  }
}
