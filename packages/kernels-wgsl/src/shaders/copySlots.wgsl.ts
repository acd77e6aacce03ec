/**
 * copySlots in WGSL: one invocation per destination word of a (pair, K or V,
 * head) row, or per element where the destination's rows share words (then
 * stored with two atomics that keep the word's other bytes). An element keeps
 * its bits where source and destination have one dtype and (fp8) the head's
 * scales agree bit for bit; otherwise its value (fp8: decode(code) · scale,
 * in f32) is rounded once to the destination (fp8: the code of value /
 * scale). Pairs whose source or (owned) destination slot is negative are
 * skipped; a rejected call writes nothing.
 */
import type { FloatDType, Fp8DType, IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { COPY_SLOTS } from '../generated/params.js';
import type { CopySlotsParams, CopySlotsRanges } from '../generated/params.js';
import { CALL_REJECTED, encodeHalf, ENTRY_BUILTINS, f32BitsOf, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import { FP8_WGSL, fp8Decode, fp8Quotient } from './fp8.wgsl.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

export interface CopySlotsPlan {
  readonly kernel: 'copySlots';
  readonly f16: F16Conversion;
  readonly srcType: PoolDType;
  readonly dstType: PoolDType;
  readonly srcLayout: 'NHD' | 'HND';
  readonly dstLayout: 'NHD' | 'HND';
  readonly fromType: IndexDType;
  readonly toType: IndexDType;
  /** Destination head rows are whole words: one invocation per word, plain stores. */
  readonly wholeWords: boolean;
  /**
   * Where source and destination share storage the rows go through staging: 'stage' writes pair m's
   * source rows to row m of the staging pools, 'staged' reads them from there (pairs whose fromSlot is
   * negative still skip).
   */
  readonly staging: 'none' | 'stage' | 'staged';
  readonly workgroupSize: number;
}

export function storedBytesOf(dtype: PoolDType): 1 | 2 | 4 {
  return isFp8(dtype) ? 1 : dtype === 'f32' ? 4 : 2;
}

function rowOf(name: string, layout: 'NHD' | 'HND'): string {
  const body = layout === 'NHD' ? 'return slot * params.heads + head;' : 'let page = slot / pageSize;\n  return (page * params.heads + head) * pageSize + (slot - page * pageSize);';
  return `fn ${name}(slot: u32, head: u32, pageSize: u32) -> u32 {\n  ${body}\n}`;
}

function bitsReader(name: string, array: string, dtype: PoolDType): string {
  const b = storedBytesOf(dtype);
  if (b === 4) return `fn ${name}(i: u32) -> u32 { return ${array}[i]; }`;
  const mask = b === 2 ? '0xffffu' : '0xffu';
  return `fn ${name}(i: u32) -> u32 { return (${array}[(i * ${b}u) >> 2u] >> (((i * ${b}u) & 3u) * 8u)) & ${mask}; }`;
}

function atomicStorer(name: string, array: string, bytes: 1 | 2): string {
  const mask = bytes === 2 ? '0xffffu' : '0xffu';
  return `fn ${name}(e: u32, bits: u32) {
  let shift = ((e * ${bytes}u) & 3u) * 8u;
  atomicAnd(&${array}[(e * ${bytes}u) >> 2u], ~(${mask} << shift));
  atomicOr(&${array}[(e * ${bytes}u) >> 2u], (bits & ${mask}) << shift);
}`;
}

/** WGSL expression: the f32 bits of the source value whose stored bits are `bits` (fp8 times the scale of f32 bits `scale`). */
function sourceValueBits(dtype: PoolDType, bits: string, scale: string): string {
  if (isFp8(dtype)) return `bitcast<u32>(bitcast<f32>(${fp8Decode(dtype as Fp8DType, bits)}) * bitcast<f32>(${scale}))`;
  return f32BitsOf(dtype as FloatDType, bits);
}

/** WGSL expression: the destination's stored bits of the value with f32 bits `value`. */
function destinationBits(dtype: PoolDType, value: string, scale: string): string {
  if (isFp8(dtype)) return fp8Quotient(dtype as Fp8DType, value, scale);
  if (dtype === 'f32') return value;
  return encodeHalf(dtype as 'f16' | 'bf16', `bitcast<f32>(${value})`);
}

export function copySlotsShader(plan: CopySlotsPlan): KernelSource<CopySlotsParams, CopySlotsRanges> {
  const bindings = COPY_SLOTS.bindings({ Dst: plan.wholeWords ? 'u32' : 'atomic<u32>' });
  const srcFp8 = isFp8(plan.srcType);
  const dstFp8 = isFp8(plan.dstType);
  const db = storedBytesOf(plan.dstType);
  const sameType = plan.srcType === plan.dstType;
  const perWord = 4 / db;
  const mask = db === 4 ? '0xffffffffu' : db === 2 ? '0xffffu' : '0xffu';
  // Bits as they are where nothing would change them.
  const keep = sameType ? (srcFp8 ? 'srcScale == dstScale' : 'true') : 'false';
  const convert = `select(${destinationBits(plan.dstType, sourceValueBits(plan.srcType, 'bits', 'srcScale'), 'dstScale')}, bits, keepBits)`;
  const element = (e: string) => `{
      let i = srcRow * params.headDim + ${e};
      var bits = 0u;
      if (kv == 0u) { bits = kBits(i); } else { bits = vBits(i); }
      value = ${convert};
    }`;
  const store = plan.wholeWords
    ? `var word = 0u;
  for (var x = 0u; x < ${perWord}u; x = x + 1u) {
    var value = 0u;
    ${element('u * ' + perWord + 'u + x')}
    word = word | ((value & ${mask}) << (x * ${8 * db}u));
  }
  let at = ((dstRow * params.headDim + u * ${perWord}u) * ${db}u) >> 2u;
  if (kv == 0u) { kDst[at] = word; } else { vDst[at] = word; }`
    : `var value = 0u;
  ${element('u')}
  if (kv == 0u) { storeK(dstRow * params.headDim + u, value); } else { storeV(dstRow * params.headDim + u, value); }`;
  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${srcFp8 || dstFp8 ? FP8_WGSL : ''}
${COPY_SLOTS.uniformsWgsl}
${bindings.wgsl}
${indexReader('fromAt', 'fromSlots', plan.fromType)}
${indexReader('toAt', 'toSlots', plan.toType)}
${bitsReader('kBits', 'kSrc', plan.srcType)}
${bitsReader('vBits', 'vSrc', plan.srcType)}
${rowOf('srcRowOf', plan.srcLayout)}
${rowOf('dstRowOf', plan.dstLayout)}
${plan.wholeWords ? '' : `${atomicStorer('storeK', 'kDst', db as 1 | 2)}\n${atomicStorer('storeV', 'vDst', db as 1 | 2)}`}

fn scaleBits(at: u32, perHead: bool, head: u32) -> u32 { return scales[at + select(0u, head, perHead)]; }

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let id = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (id >= params.units || ${CALL_REJECTED}) { return; }
  let perHalf = params.heads * params.unitsPerRow;
  let m = id / (2u * perHalf);
  let kv = (id / perHalf) % 2u;
  let h = (id / params.unitsPerRow) % params.heads;
  let u = id % params.unitsPerRow;
  let fromSlot = fromAt(m);
  let toSlot = toAt(m);
  if (!indexBelow(fromSlot, params.fromBelow) || !indexBelow(toSlot, params.toBelow)) { return; }
  let srcRow = srcRowOf(${plan.staging === 'staged' ? 'm' : 'fromSlot.x'}, h, params.srcPageSize);
  let dstRow = dstRowOf(${plan.staging === 'stage' ? 'm' : 'toSlot.x'}, h, params.dstPageSize);
  let srcScale = ${srcFp8 ? `select(scaleBits(params.kSrcScaleAt, (params.scalesPerHead & 1u) != 0u, h), scaleBits(params.vSrcScaleAt, (params.scalesPerHead & 2u) != 0u, h), kv == 1u)` : '0u'};
  let dstScale = ${dstFp8 ? `select(scaleBits(params.kDstScaleAt, (params.scalesPerHead & 4u) != 0u, h), scaleBits(params.vDstScaleAt, (params.scalesPerHead & 8u) != 0u, h), kv == 1u)` : '0u'};
  let keepBits = ${keep};
  ${store}
}
`;
  return kernelSource(COPY_SLOTS, bindings, code);
}
