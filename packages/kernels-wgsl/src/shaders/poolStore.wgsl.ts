/**
 * Head rows into KV pools and back (ops/kvPools.ts): `poolStore` writes rows
 * [L, T, H, D] of the model dtype into an fp8 pool at the slots, NHD or HND,
 * as codes of x / scale, for head dims that are not a multiple of 4 (the
 * row kernels write every other pool themselves); `poolRead` (dequantizeKv)
 * reads rows of a pool back into [N, H, D] rows of a float dtype. An
 * invocation builds whole u32 words where the destination's runs (a token's
 * [H, D] row in NHD, a head row in HND) are whole words, so no two
 * invocations share a word; otherwise each stores its element with two
 * atomics that leave the word's other bytes alone.
 */
import type { FloatDType, Fp8DType, IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { POOL_READ, POOL_STORE } from '../generated/params.js';
import type { PoolReadParams, PoolReadRanges, PoolStoreParams, PoolStoreRanges } from '../generated/params.js';
import { CALL_REJECTED, ENTRY_BUILTINS, encodeHalf, f32BitsOf, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import { FP8_WGSL, fp8Decode, fp8Quotient } from './fp8.wgsl.js';
import { poolRowWgsl } from './kvPoolRows.wgsl.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export interface PoolStorePlan {
  readonly kernel: 'poolStore';
  readonly f16: F16Conversion;
  readonly sourceType: FloatDType;
  readonly poolType: Fp8DType;
  readonly slotType: IndexDType;
  readonly layout: 'NHD' | 'HND';
  /** Every run of the destination is whole words: one invocation per word, plain stores. */
  readonly wholeWords: boolean;
  readonly workgroupSize: number;
}

export interface PoolReadPlan {
  readonly kernel: 'poolRead';
  readonly f16: F16Conversion;
  readonly poolType: PoolDType;
  readonly rowsType: FloatDType;
  readonly slotType: IndexDType;
  readonly layout: 'NHD' | 'HND';
  readonly wholeWords: boolean;
  readonly workgroupSize: number;
}

/** Bytes of one stored element. */
export function storedBytes(dtype: PoolDType): 1 | 2 | 4 {
  return isFp8(dtype) ? 1 : dtype === 'f32' ? 4 : 2;
}

/** A WGSL function `name(i: u32) -> u32`: the stored bits of element `i` of an `array<u32>` of `dtype`. */
function bitsReader(name: string, array: string, dtype: PoolDType): string {
  const bytes = storedBytes(dtype);
  if (bytes === 4) return `fn ${name}(i: u32) -> u32 { return ${array}[i]; }`;
  const mask = bytes === 2 ? '0xffffu' : '0xffu';
  return `fn ${name}(i: u32) -> u32 { return (${array}[(i * ${bytes}u) >> 2u] >> (((i * ${bytes}u) & 3u) * 8u)) & ${mask}; }`;
}

/** WGSL function `store_element(e, bits)`: one element's bits into an atomic word array, the other bytes kept. */
function atomicStorer(array: string, bytes: 1 | 2): string {
  const mask = bytes === 2 ? '0xffffu' : '0xffu';
  return `fn store_element(e: u32, bits: u32) {
  let shift = ((e * ${bytes}u) & 3u) * 8u;
  atomicAnd(&${array}[(e * ${bytes}u) >> 2u], ~(${mask} << shift));
  atomicOr(&${array}[(e * ${bytes}u) >> 2u], (bits & ${mask}) << shift);
}`;
}

/** WGSL statements defining `head` and `i` (the source element) for element `e` of the run: the source is read through its head stride. */
function sourceIndex(e: string): string {
  // Element of the token's [H, D] row: an NHD run is the whole row (seg 0), an HND run head seg's.
  return `let inRow = seg * params.headDim + ${e};
    let head = inRow / params.headDim;
    let i = source0 + head * params.sourceHeadStride + (inRow - head * params.headDim);`;
}

export function poolStoreShader(plan: PoolStorePlan): KernelSource<PoolStoreParams, PoolStoreRanges> {
  const bindings = POOL_STORE.bindings({ scaled: true, Dst: plan.wholeWords ? 'u32' : 'atomic<u32>' });
  // The fp8 code of source element i.
  const stored = fp8Quotient(plan.poolType, f32BitsOf(plan.sourceType, 'sourceBits(i)'), 'scale[select(0u, head, params.perHeadScale == 1u)]');
  const store = plan.wholeWords
    ? `var word = 0u;
  for (var k = 0u; k < 4u; k = k + 1u) {
    let e = u * 4u + k;
    ${sourceIndex('e')}
    word = word | (${stored} << (k * 8u));
  }
  pool[(first + u * 4u) >> 2u] = word;`
    : `${sourceIndex('u')}
  store_element(first + u, ${stored});`;
  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${FP8_WGSL}
${POOL_STORE.uniformsWgsl}
${bindings.wgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${bitsReader('sourceBits', 'source', plan.sourceType)}
${poolRowWgsl(plan.layout)}
${plan.wholeWords ? '' : atomicStorer('pool', 1)}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (id >= params.units || ${CALL_REJECTED}) { return; }
  let perToken = params.segments * params.segmentUnits;
  let perLayer = params.tokens * perToken;
  let l = id / perLayer;
  let t = (id % perLayer) / perToken;
  let inToken = id % perToken;
  let seg = inToken / params.segmentUnits;
  let u = inToken % params.segmentUnits;
  let slot = slotAt(t);
  let inPool = indexBelow(slot, params.slotBelow);
  if (!inPool) { return; }
  let first = (l * params.slotBelow * params.heads + poolRow(slot.x, seg, params.heads, params.pageSize)) * params.headDim;
  let source0 = params.sourceOffset + l * params.sourceLayerElements + t * params.sourceTokenStride;
  ${store}
}
`;
  return kernelSource(POOL_STORE, bindings, code);
}

export function poolReadShader(plan: PoolReadPlan): KernelSource<PoolReadParams, PoolReadRanges> {
  const scaled = isFp8(plan.poolType);
  const rowBytes = storedBytes(plan.rowsType);
  const bindings = POOL_READ.bindings({ scaled, Dst: plan.wholeWords ? 'u32' : 'atomic<u32>' });
  const value = scaled
    ? `bitcast<f32>(${fp8Decode(plan.poolType as 'fp8e4m3', 'poolBits(first + e)')}) * bitcast<f32>(scale[select(0u, h, params.perHeadScale == 1u)])`
    : `bitcast<f32>(${f32BitsOf(plan.poolType as FloatDType, 'poolBits(first + e)')})`;
  const encoded = (v: string) => (plan.rowsType === 'f32' ? `bitcast<u32>(${v})` : encodeHalf(plan.rowsType as 'f16', v));
  const perWord = 4 / rowBytes;
  const store = plan.wholeWords
    ? `var word = 0u;
  for (var k = 0u; k < ${perWord}u; k = k + 1u) {
    let e = u * ${perWord}u + k;
    word = word | (${encoded(value)} << (k * ${8 * rowBytes}u));
  }
  rows[((row0 + u * ${perWord}u) * ${rowBytes}u) >> 2u] = word;`
    : `let e = u;
  store_element(row0 + u, ${encoded(value)});`;
  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${scaled ? FP8_WGSL : ''}
${POOL_READ.uniformsWgsl}
${bindings.wgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${bitsReader('poolBits', 'pool', plan.poolType)}
${poolRowWgsl(plan.layout)}
${plan.wholeWords ? '' : atomicStorer('rows', rowBytes as 1 | 2)}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (id >= params.units || ${CALL_REJECTED}) { return; }
  let perSlot = params.heads * params.rowUnits;
  let n = id / perSlot;
  let h = (id % perSlot) / params.rowUnits;
  let u = id % params.rowUnits;
  let slot = slotAt(n);
  let inPool = indexBelow(slot, params.slotBelow);
  if (!inPool) { return; }
  let first = poolRow(slot.x, h, params.heads, params.pageSize) * params.headDim;
  let row0 = (n * params.heads + h) * params.headDim;
  ${store}
}
`;
  return kernelSource(POOL_READ, bindings, code);
}
