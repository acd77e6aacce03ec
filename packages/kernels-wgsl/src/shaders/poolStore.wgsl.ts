/**
 * Head rows into KV pools and back (ops/kvPools.ts): `poolStore` writes rows
 * [L, T, H, D] of the model dtype into an fp8 pool at the slots, NHD or HND,
 * as codes of x / scale, for head dims that are not a multiple of 4 (the
 * row kernels write every other pool themselves). An invocation builds whole
 * u32 words where the destination's runs (a token's [H, D] row in NHD, a head
 * row in HND) are whole words, so no two invocations share a word; otherwise
 * each stores its element with two atomics that leave the word's other bytes
 * alone.
 *
 * `poolRead` (dequantizeKv) reads rows of a pool back into [N, H, D] rows of
 * a float dtype: a streaming kernel over units of E elements (16 bytes of
 * rows where D allows, else 8 or 4), each invocation a few units in flight
 * per step of a grid-stride loop whose row, head and slot positions advance
 * by additions. fp8 codes are looked up in a workgroup table of every code's
 * row bits (decode · scale in f32, rounded to the rows' dtype: the
 * arithmetic a code would take, done once per code and head); rows of the
 * pool's own dtype keep their bits (NaN quieted as the rounding quiets it).
 * 16-bit rows of odd D go element by element, with atomics.
 */
import type { FloatDType, Fp8DType, IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { POOL_READ, POOL_STORE } from '../generated/params.js';
import type { PoolReadParams, PoolReadRanges, PoolStoreParams, PoolStoreRanges } from '../generated/params.js';
import { CALL_REJECTED, ENTRY_BUILTINS, encodeHalf, f32BitsOf, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP, packWord } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import { FP8_WGSL, fp8Decode, fp8Quotient, fp8ValueWgsl } from './fp8.wgsl.js';
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
  /** HND with a power-of-two page size: a slot's page and row by a shift and a mask, not a division. */
  readonly pageShift: boolean;
  /** Elements of a unit: 16, 8 or 4 bytes of rows (a vector each invocation stores whole); 0: 16-bit rows of odd D, by element. */
  readonly elements: number;
  /** Units an invocation has in flight per step. */
  readonly unitsPerStep: number;
  /** fp8 pools: codes looked up in a workgroup table ('table') or decoded one by one ('bits'). */
  readonly fp8Decode: 'table' | 'bits' | undefined;
  /** Heads the table holds: H where scales are per head, else 1. */
  readonly tableHeads: number;
  readonly workgroupSize: number;
}

/** Storage of a vector of `bytes` bytes (4, 8 or 16; smaller ones are read from their word). */
function vectorOf(bytes: number): string {
  return bytes >= 16 ? 'vec4<u32>' : bytes === 8 ? 'vec2<u32>' : 'u32';
}

/** The names of a vector's words. */
function wordsOf(name: string, bytes: number): string[] {
  return bytes >= 16 ? ['x', 'y', 'z', 'w'].map((c) => `${name}.${c}`) : bytes === 8 ? [`${name}.x`, `${name}.y`] : [name];
}

/**
 * WGSL expression quieting the NaNs of 16-bit values packed in `v` (a u32
 * or vector of them) as decoding and rounding them would: bf16 to 0x7fc0,
 * f16 (integer decoding) to its sign and 0x7e00. A half is NaN where its
 * magnitude plus the headroom above its infinity carries into bit 15.
 */
function quietHalves(dtype: 'f16' | 'bf16', v: string, type: string): string {
  const [headroom, keep, nan] = dtype === 'bf16' ? ['0x007f007fu', '0xffffu', '0x7fc07fc0u'] : ['0x03ff03ffu', '0x7fffu', '0x7e007e00u'];
  const splat = (x: string) => (type === 'u32' ? x : `${type}(${x})`);
  return `quiet(${v}, ${splat(headroom)}, ${splat(keep)}, ${splat(nan)})`;
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
  return plan.elements === 0 ? poolReadElements(plan) : poolReadUnits(plan);
}

/** 16-bit rows of odd D: one invocation per element, stored with two atomics (the word's other half is another row's). */
function poolReadElements(plan: PoolReadPlan): KernelSource<PoolReadParams, PoolReadRanges> {
  const scaled = isFp8(plan.poolType);
  const rowBytes = storedBytes(plan.rowsType) as 1 | 2;
  const bindings = POOL_READ.bindings({ scaled, Pool: 'u32', Dst: 'atomic<u32>' });
  const value = scaled
    ? `bitcast<f32>(${fp8Decode(plan.poolType as 'fp8e4m3', 'poolBits(first + u)')}) * bitcast<f32>(scale[select(0u, h, params.perHeadScale == 1u)])`
    : `bitcast<f32>(${f32BitsOf(plan.poolType as FloatDType, 'poolBits(first + u)')})`;
  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${scaled ? FP8_WGSL : ''}
${POOL_READ.uniformsWgsl}
${bindings.wgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${bitsReader('poolBits', 'pool', plan.poolType)}
${poolRowWgsl(plan.layout)}
${atomicStorer('rows', rowBytes)}

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
  store_element(row0 + u, ${encodeHalf(plan.rowsType as 'f16', value)});
}
`;
  return kernelSource(POOL_READ, bindings, code);
}

/**
 * Units of E elements: invocation g of G takes units g, g + G, ... up to
 * unitsPerStep of them a step (loads first, then stores), then steps on by
 * unitsPerStep · G; each unit's (token, head, vector) follows by additions
 * with carries, so the loop divides nothing. A unit's rows index is its
 * number: rows are dense [N, H, D].
 */
function poolReadUnits(plan: PoolReadPlan): KernelSource<PoolReadParams, PoolReadRanges> {
  const fp8 = isFp8(plan.poolType) ? (plan.poolType as Fp8DType) : undefined;
  const E = plan.elements;
  const rowBytes = storedBytes(plan.rowsType);
  const poolBytes = storedBytes(plan.poolType);
  const rowsUnit = E * rowBytes;
  const poolUnit = E * poolBytes;
  const poolVector = vectorOf(poolUnit);
  const rowsVector = vectorOf(rowsUnit);
  const bindings = POOL_READ.bindings({ scaled: fp8 !== undefined, Pool: poolVector, Dst: rowsVector });
  const K = plan.unitsPerStep;
  const streams = Array.from({ length: K }, (_, j) => j);
  const table = plan.fp8Decode === 'table';
  const tableSize = 256 * plan.tableHeads;
  // Rows of the pool's own dtype keep their bits (f16 where its decoding is the integer one, whose NaNs are known).
  const sameBits = !fp8 && plan.poolType === plan.rowsType && (plan.rowsType !== 'f16' || plan.f16.decode === 'integer');

  /** WGSL statements loading stream j's unit of the pool into `p${j}` (32 bytes: two vectors, `p${j}a` and `p${j}b`). */
  const load = (j: number): string => {
    if (poolUnit === 32) return [`let p${j}a = pool[2u * at${j}];`, `let p${j}b = pool[2u * at${j} + 1u];`].join(' ');
    if (poolUnit >= 4) return `let p${j} = pool[at${j}];`;
    // Under a word: the word that holds it, shifted down.
    return [`let p${j}byte = at${j} * ${poolUnit}u;`, `let p${j} = pool[p${j}byte >> 2u] >> ((p${j}byte & 3u) * 8u);`].join(' ');
  };
  /** WGSL expression: the stored bits of element k of stream j's unit (the low bits; the rest cleared for 8- and 16-bit ones). */
  const poolBitsOf = (j: number, k: number): string => {
    const words = poolUnit === 32 ? [...wordsOf(`p${j}a`, 16), ...wordsOf(`p${j}b`, 16)] : poolUnit >= 4 ? wordsOf(`p${j}`, poolUnit) : [`p${j}`];
    const byte = k * poolBytes;
    const word = words[byte >> 2]!;
    const shifted = byte % 4 === 0 ? word : `(${word} >> ${(byte % 4) * 8}u)`;
    return poolBytes === 4 ? shifted : `(${shifted} & ${poolBytes === 2 ? '0xffffu' : '0xffu'})`;
  };
  /** WGSL expression: the f32 value of element k of stream j's unit (fp8 'bits': decode · scale). */
  const elementValue = (j: number, k: number): string =>
    fp8 ? `bitcast<f32>(fp8Value(${poolBitsOf(j, k)})) * scale${j}` : `bitcast<f32>(${f32BitsOf(plan.poolType as FloatDType, poolBitsOf(j, k))})`;
  /** WGSL expression: stream j's unit of rows. */
  const unitOf = (j: number): string => {
    if (sameBits) return plan.rowsType === 'f32' ? `p${j}` : quietHalves(plan.rowsType as 'f16' | 'bf16', `p${j}`, rowsVector);
    const perWord = 4 / rowBytes;
    const words = Array.from({ length: rowsUnit / 4 }, (_, w) => {
      const ks = Array.from({ length: perWord }, (_, i) => w * perWord + i);
      if (table) return ks.map((k, i) => (i === 0 ? `codeTable[tableBase${j} + ${poolBitsOf(j, k)}]` : `(codeTable[tableBase${j} + ${poolBitsOf(j, k)}] << ${16 * i}u)`)).join(' | ');
      return packWord(plan.rowsType, ks.map((k) => elementValue(j, k)));
    });
    return words.length === 1 ? words[0]! : `${rowsVector}(${words.join(', ')})`;
  };
  const encoded = (value: string) => (plan.rowsType === 'f32' ? `bitcast<u32>(${value})` : encodeHalf(plan.rowsType as 'f16', value));
  const fill = table
    ? `// Row bits of every code (and head): the arithmetic each code would take, done once per code.
  for (var c = lane; c < ${tableSize}u; c = c + ${plan.workgroupSize}u) {
    let s = bitcast<f32>(scale[${plan.tableHeads > 1 ? 'c >> 8u' : '0u'}]);
    codeTable[c] = ${encoded('bitcast<f32>(fp8Value(c & 0xffu)) * s')};
  }
  workgroupBarrier();`
    : '';
  const pageLines = plan.pageShift ? ['let pageBits = countTrailingZeros(params.pageSize);', 'let pageMask = params.pageSize - 1u;'].join(' ') : '';
  const poolRowOf = (j: number): string => {
    const slot = `select(0u, s${j}.x, ok${j})`;
    if (plan.layout === 'NHD') return `${slot} * H + h${j}`;
    if (!plan.pageShift) return `poolRow(${slot}, h${j}, H, params.pageSize)`;
    return `(((${slot} >> pageBits) * H + h${j}) << pageBits) + (${slot} & pageMask)`;
  };
  const step = (j: number): string => [
    `let in${j} = i${j} < params.units;`,
    `let s${j} = slotAt(select(0u, n${j}, in${j}));`,
    `let ok${j} = in${j} && indexBelow(s${j}, params.slotBelow);`,
    `let at${j} = (${poolRowOf(j)}) * U + v${j};`,
    load(j),
    ...(fp8 && !table ? [`let scale${j} = bitcast<f32>(scale[select(0u, h${j}, params.perHeadScale == 1u)]);`] : []),
    ...(table ? [`let tableBase${j} = ${plan.tableHeads > 1 ? `h${j} << 8u` : '0u'};`] : []),
  ].join('\n    ');
  const advance = (j: number): string => `i${j} = i${j} + stride;
    v${j} = v${j} + strideV;
    let cv${j} = v${j} >= U;
    v${j} = select(v${j}, v${j} - U, cv${j});
    h${j} = h${j} + strideH + select(0u, 1u, cv${j});
    let ch${j} = h${j} >= H;
    h${j} = select(h${j}, h${j} - H, ch${j});
    n${j} = n${j} + strideN + select(0u, 1u, ch${j});`;
  const start = (j: number): string => `var i${j} = first + ${j}u * invocations;
  let r${j} = i${j} / U;
  var v${j} = i${j} - r${j} * U;
  var n${j} = r${j} / H;
  var h${j} = r${j} - n${j} * H;`;

  const code = `${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? fp8ValueWgsl(fp8) : ''}
${POOL_READ.uniformsWgsl}
${bindings.wgsl}
${indexReader('slotAt', 'slots', plan.slotType)}
${plan.layout === 'HND' && !plan.pageShift ? poolRowWgsl('HND') : ''}
${sameBits && plan.rowsType !== 'f32' ? `fn quiet(v: ${rowsVector}, headroom: ${rowsVector}, keep: ${rowsVector}, nan: ${rowsVector}) -> ${rowsVector} {
  let halves = ((((v & ${rowsVector === 'u32' ? '0x7fff7fffu' : `${rowsVector}(0x7fff7fffu)`}) + headroom) >> ${rowsVector === 'u32' ? '15u' : `${rowsVector}(15u)`}) & ${rowsVector === 'u32' ? '0x10001u' : `${rowsVector}(0x10001u)`}) * keep;
  return (v & ~halves) | (nan & halves);
}` : ''}
${table ? `var<workgroup> codeTable: array<u32, ${tableSize}>;` : ''}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  ${fill}
  if (${CALL_REJECTED}) { return; }
  let U = params.rowUnits;
  let H = params.heads;
  ${pageLines}
  let invocations = workgroupCount.x * workgroupCount.y * ${plan.workgroupSize}u;
  let first = linearWorkgroup * ${plan.workgroupSize}u + lane;
  // One step of a unit: ${K} × invocations units on, as rows and vectors, and rows as tokens and heads.
  let stride = ${K}u * invocations;
  let strideRows = stride / U;
  let strideV = stride - strideRows * U;
  let strideN = strideRows / H;
  let strideH = strideRows - strideN * H;
  ${streams.map(start).join('\n  ')}
  loop {
    if (i0 >= params.units) { break; }
    ${streams.map(step).join('\n    ')}
    ${streams.map((j) => `if (ok${j}) { rows[i${j}] = ${unitOf(j)}; }`).join('\n    ')}
    ${streams.map(advance).join('\n    ')}
  }
}
`;
  return kernelSource(POOL_READ, bindings, code);
}
