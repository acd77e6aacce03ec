/**
 * pagedAttention in WGSL, split-KV (flash-decoding). The grid is
 * (piece, KV head): a piece is one request's cached tokens inside one span of
 * `tokensPerSplit` entries of kvSlots, numbered `span + request`, so the
 * pieces of every request are distinct and there are at most
 * ceil(C / tokensPerSplit) + B of them, known on the host without reading
 * the offsets. One workgroup takes all the request's queries and the Hq / H
 * query heads of its KV head, R rows at a time, so each K/V row is read once
 * per R rows:
 *
 *  1. one invocation per token of a tile of T tokens: its R logits (q rows in
 *     workgroup memory, the K row read in 16-byte units where rows allow),
 *     scaled, capped and masked;
 *  2. the tile's maximum per row (within subgroups, then one workgroup
 *     atomic each), the running maximum and the factor that rescales what
 *     was summed before it;
 *  3. exp(logit - max) per token and row, then lanes that each own a few
 *     columns of the row and a share of the tile's tokens add p · v into f32
 *     accumulators (the online softmax), and the sums of p beside them.
 *
 * With `softmax: 'group'` (passes of few rows, 'lanes' reads) the three phases become one walk per
 * group of a row's lanes over its own tokens, the softmax's state in registers, and the groups' states
 * meet only at the pass's end.
 *
 * After the last tile the lanes' shares are added in workgroup memory and
 * the rows are written: to out and lse where the request has one piece (or
 * more queries than `splitQueries`, whose row tiles are then spread over its
 * pieces instead), else normalised into `partial` with their log-sum-exp, and
 * the merge kernel combines a query's pieces by it.
 */
import type { FloatDType, Fp8DType, IndexDType, PoolDType } from '@kvkit/contracts';
import { isFp8 } from '@kvkit/contracts';
import { CHECK_SEGMENTS, PAGED_ATTENTION, PAGED_ATTENTION_MERGE } from '../generated/params.js';
import type { CheckSegmentsParams, CheckSegmentsRanges, PagedAttentionMergeParams, PagedAttentionMergeRanges, PagedAttentionParams, PagedAttentionRanges } from '../generated/params.js';
import { CALL_REJECTED, elementReader, ENTRY_BUILTINS, halfFloatWgsl, INDEX_RANGE_WGSL, indexReader, LINEAR_WORKGROUP } from './common.wgsl.js';
import type { F16Conversion } from './common.wgsl.js';
import { FP8_WGSL, fp8Decode } from './fp8.wgsl.js';
import { poolRowWgsl } from './kvPoolRows.wgsl.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

/** How a pool row is read: units of 4, 2 or 1 words, or element by element (rows that do not fill whole words). */
export interface PoolRowUnits {
  /** Words per unit; 0: element access. */
  readonly words: 0 | 1 | 2 | 4;
  /** Elements per unit. */
  readonly elements: number;
  /** Units per row. */
  readonly perRow: number;
}

export interface PagedAttentionPlan {
  readonly kernel: 'pagedAttention';
  readonly f16: F16Conversion;
  readonly qType: FloatDType;
  readonly poolType: PoolDType;
  readonly layout: 'NHD' | 'HND';
  readonly headDim: number;
  /** Values of each V row read (vHeadDim): its first valueDim, headDim where V rows are whole. */
  readonly valueDim: number;
  readonly qIndptrType: IndexDType;
  readonly kvIndptrType: IndexDType;
  readonly slotType: IndexDType;
  /** How K and V rows are read; `perRow` counts a K row (and is the step between rows), V rows take valueDim / elements of them. */
  readonly units: PoolRowUnits;
  /** Invocations per workgroup, and tokens per tile (one each in the logit phase). */
  readonly workgroupSize: number;
  /** Query rows (query, head of the group) a pass over the tokens carries. */
  readonly rowsPerPass: number;
  /** Lanes that share one V row in the accumulation (each owns `unitsPerLane` units of it). */
  readonly lanes: number;
  readonly unitsPerLane: number;
  /** Units of a K row each of `lanes` lanes reads where K is read by lanes. */
  readonly keyUnitsPerLane: number;
  /** 16-bit rows of odd D share words with the next row: stored with atomics. */
  readonly atomicOut: boolean;
  /** The tile's maximum of each row: within subgroups first (one workgroup atomic a subgroup), or one atomic an invocation. */
  readonly tileMax: 'subgroup' | 'atomic';
  /**
   * How K rows are read for the logits: 'row', each invocation its token's whole row; 'lanes', the
   * `lanes` invocations of a row each their columns (as V is read), the dots added by subgroup shuffles.
   */
  readonly kRead: 'row' | 'lanes';
  /**
   * Where the online softmax runs: 'tile', over the workgroup's tile of tokens (its maximum through
   * workgroup atomics, p through workgroup memory, barriers between the phases); 'group', in each group
   * of `lanes` lanes over its own tokens, p in registers and no barrier until the pass's end, where
   * the groups' states are rescaled to the largest maximum and added ('lanes' K reads only).
   */
  readonly softmax: 'tile' | 'group';
}

export interface PagedAttentionMergePlan {
  readonly kernel: 'pagedAttentionMerge';
  readonly f16: F16Conversion;
  readonly qType: FloatDType;
  readonly headDim: number;
  readonly qIndptrType: IndexDType;
  readonly kvIndptrType: IndexDType;
  readonly atomicOut: boolean;
  readonly workgroupSize: number;
}

export interface CheckSegmentsPlan {
  readonly kernel: 'checkSegments';
  readonly qIndptrType: IndexDType;
  readonly kvIndptrType: IndexDType;
  readonly workgroupSize: number;
}

/** Stands for -inf in the kernels (WGSL has no infinite constant): below every logit a finite input gives. */
const NEG = '-3.0e38';

function bytesOf(dtype: PoolDType): 1 | 2 | 4 {
  return isFp8(dtype) ? 1 : dtype === 'f32' ? 4 : 2;
}

/** The widest unit a row of `D` elements of `dtype` is read in (and its first `Dv`, where V is a prefix): 16 bytes where rows allow, at most 8 elements (so a lane's registers stay few). */
export function poolRowUnits(dtype: PoolDType, D: number, Dv = D): PoolRowUnits {
  const b = bytesOf(dtype);
  for (const words of [4, 2, 1] as const) {
    const elements = (words * 4) / b;
    if ((D * b) % (words * 4) === 0 && (Dv * b) % (words * 4) === 0 && elements <= 8) return { words, elements, perRow: D / elements };
  }
  return { words: 0, elements: 1, perRow: D };
}

/** WGSL function `${name}(i)`: the value of entry i of an index tensor packed into `indices` from word `${at}` (i32 one word, i64 two). */
function packedIndex(name: string, at: string, dtype: IndexDType): string {
  return dtype === 'i64'
    ? `fn ${name}(i: u32) -> u32 { return indices[${at} + 2u * i]; }`
    : `fn ${name}(i: u32) -> u32 { return indices[${at} + i]; }`;
}

/** WGSL: `unitValues_${x}(row, u, scale) -> array<f32, E>`, the values of unit u of pool row `row` (fp8: decode(code) · scale in f32). */
function unitReader(x: 'k' | 'v', pool: string, dtype: PoolDType, D: number, units: PoolRowUnits): string {
  const E = units.elements;
  const values: string[] = [];
  const fp8 = isFp8(dtype) ? (dtype as Fp8DType) : undefined;
  const code = (w: string, k: number) => `bitcast<f32>(${fp8Decode(fp8!, `((${w} >> ${8 * k}u) & 0xffu)`)}) * scale`;
  let load: string;
  if (units.words === 0) {
    const b = bytesOf(dtype);
    const mask = b === 2 ? '0xffffu' : '0xffu';
    load = `let e = row * ${D}u + u;
  let bits = (${pool}[(e * ${b}u) >> 2u] >> (((e * ${b}u) & 3u) * 8u)) & ${mask};`;
    values.push(fp8 ? `bitcast<f32>(${fp8Decode(fp8, 'bits')}) * scale` : dtype === 'f16' ? 'f16ToF32(bits)' : 'bf16ToF32(bits)');
  } else {
    load = `let w = ${pool}[row * ${units.perRow}u + u];`;
    const word = (i: number) => (units.words === 1 ? 'w' : `w[${i}]`);
    for (let i = 0; i < units.words; i++) {
      const wi = word(i);
      if (fp8) for (let k = 0; k < 4; k++) values.push(code(wi, k));
      else if (dtype === 'f32') values.push(`bitcast<f32>(${wi})`);
      else if (dtype === 'f16') values.push(`f16PairToF32(${wi}).x`, `f16PairToF32(${wi}).y`);
      else values.push(`bf16ToF32(${wi})`, `bf16ToF32(${wi} >> 16u)`);
    }
  }
  return `fn unitValues_${x}(row: u32, u: u32, scale: f32) -> array<f32, ${E}> {
  ${load}
  return array<f32, ${E}>(${values.join(', ')});
}`;
}

/** WGSL `store_half(e, bits)`: one 16-bit element into a word shared with another invocation's. */
const HALF_STORER = `fn store_half(e: u32, bits: u32) {
  let shift = (e & 1u) * 16u;
  atomicAnd(&out[e >> 1u], ~(0xffffu << shift));
  atomicOr(&out[e >> 1u], (bits & 0xffffu) << shift);
}`;

/**
 * WGSL statements writing row `rowVar`'s D values (`value(d)`, an f32
 * expression) to out from element `first`, by invocations `lane` of
 * `threads`: whole words where they can, else one half at a time.
 */
function outStores(qType: FloatDType, D: number, atomicOut: boolean, first: string, value: (d: string) => string, lane: string, threads: number): string {
  if (qType === 'f32') return `for (var d = ${lane}; d < ${D}u; d = d + ${threads}u) { out[${first} + d] = bitcast<u32>(${value('d')}); }`;
  const enc = (v: string) => (qType === 'f16' ? `f32ToF16(${v})` : `f32ToBf16(${v})`);
  if (atomicOut) return `for (var d = ${lane}; d < ${D}u; d = d + ${threads}u) { store_half(${first} + d, ${enc(value('d'))}); }`;
  return `for (var w = ${lane}; w < ${D / 2}u; w = w + ${threads}u) {
      let d0 = 2u * w;
      let d1 = d0 + 1u;
      out[(${first} >> 1u) + w] = ${enc(value('d0'))} | (${enc(value('d1'))} << 16u);
    }`;
}

export function pagedAttentionShader(plan: PagedAttentionPlan): KernelSource<PagedAttentionParams, PagedAttentionRanges> {
  const { headDim: D, valueDim: Dv, units, workgroupSize: T, rowsPerPass: R, lanes: L, unitsPerLane: UPL, keyUnitsPerLane: KUPL } = plan;
  const E = units.elements;
  // V rows: the first Dv values of rows D apart.
  const valueUnits = Dv / E;
  const laneValues = UPL * E;
  const groupsOfLanes = T / L;
  const fp8 = isFp8(plan.poolType);
  const kvRow = units.words === 4 ? 'vec4<u32>' : units.words === 2 ? 'vec2<u32>' : 'u32';
  const bindings = PAGED_ATTENTION.bindings({ KvRow: kvRow, Out: plan.atomicOut ? 'atomic<u32>' : 'u32' });
  // q rows as vec4s where units come four elements at a time: one workgroup load and a dot() per four.
  const quad = E % 4 === 0;
  const qAt = (i: string) => (quad ? `qRows[(${i}) >> 2u][(${i}) & 3u]` : `qRows[${i}]`);
  const logitStep = quad
    ? `for (var x = 0u; x < ${E / 4}u; x = x + 1u) {
            let kq = vec4<f32>(kv[4u * x], kv[4u * x + 1u], kv[4u * x + 2u], kv[4u * x + 3u]);
            for (var r = 0u; r < ${R}u; r = r + 1u) { dots[r] = dots[r] + dot(qRows[(r * ${D}u + u * ${E}u) / 4u + x], kq); }
          }`
    : `for (var x = 0u; x < ${E}u; x = x + 1u) {
            let d = u * ${E}u + x;
            for (var r = 0u; r < ${R}u; r = r + 1u) { dots[r] = dots[r] + qRows[r * ${D}u + d] * kv[x]; }
          }`;
  const scaleOf = (x: 'k' | 'v') => (fp8 ? `bitcast<f32>(indices[params.${x}ScaleAt + h * params.${x}ScaleStep])` : '1.0');
  const subgroups = plan.tileMax === 'subgroup' || plan.kRead === 'lanes';
  const reduceDots = Array.from({ length: Math.log2(L) }, (_, i) => `dots[r] = dots[r] + subgroupShuffleXor(dots[r], ${L >> (i + 1)}u);`).join(' ');
  const logitsByRow = `// 1. This invocation's token: its R logits.
      let j = t0 + lane;
      var logits: array<f32, ${R}>;
      for (var r = 0u; r < ${R}u; r = r + 1u) { logits[r] = ${NEG}; }
      if (j < tokenTo) {
        let slot = kvSlotAt(kvStart + j);
        let row = poolRow(slot, h, params.kvHeads, params.pageSize);
        tileSlots[lane] = row;
        var dots: array<f32, ${R}>;
        for (var r = 0u; r < ${R}u; r = r + 1u) { dots[r] = 0.0; }
        for (var u = 0u; u < ${units.perRow}u; u = u + 1u) {
          let kv = unitValues_k(row, u, kScale);
          LOGIT_STEP
        }
        for (var r = 0u; r < ${R}u; r = r + 1u) {
          let p = kvLen - qLen + (rowBase + r) / groupSize;
          let visible = r < rowsHere && (params.causal == 0u || j <= p) && (params.slidingWindow == 0u || j + params.slidingWindow > p);
          if (visible) { logits[r] = softcapped(dots[r] * params.scale); }
        }
      }`;
  // Whether column j is one row r sees (causal and window masks), for a token that is `live`.
  const visibleOf = (live: string) =>
    `${live} && r < rowsHere && (params.causal == 0u || j <= p) && (params.slidingWindow == 0u || j + params.slidingWindow > p)`;
  // 'lanes' K reads: the dots of K row `row` (token j, if `live`) with each of the R rows, each lane over its columns,
  // summed over the row's lanes by the shuffles.
  const laneDots = `var dots: array<f32, ${R}>;
        for (var r = 0u; r < ${R}u; r = r + 1u) { dots[r] = 0.0; }
        for (var s = 0u; s < ${KUPL}u; s = s + 1u) {
          let u = column + s * ${L}u;
          if (live && u < ${units.perRow}u) {
            let kv = unitValues_k(row, u, kScale);
            ${logitStep}
          }
        }
        for (var r = 0u; r < ${R}u; r = r + 1u) { ${reduceDots} }`;
  const logitsByLanes = `// 1. The tile's rows, then each row's lanes take their columns of K; the dots meet through shuffles.
      if (t0 + lane < tokenTo) { tileSlots[lane] = poolRow(kvSlotAt(kvStart + t0 + lane), h, params.kvHeads, params.pageSize); }
      workgroupBarrier();
      for (var step = 0u; step < ${T / groupsOfLanes}u; step = step + 1u) {
        let t = laneShare + step * ${groupsOfLanes}u;
        let j = t0 + t;
        let live = j < tokenTo;
        let row = tileSlots[t];
        ${laneDots}
        if (column == 0u) {
          for (var r = 0u; r < ${R}u; r = r + 1u) {
            let p = kvLen - qLen + (rowBase + r) / groupSize;
            tile[r * ${T}u + t] = select(${NEG}, softcapped(dots[r] * params.scale), ${visibleOf('live')});
          }
        }
      }
      workgroupBarrier();
      var logits: array<f32, ${R}>;
      for (var r = 0u; r < ${R}u; r = r + 1u) { logits[r] = tile[r * ${T}u + lane]; }`;
  // Each group of L lanes walks its tokens (every groupsOfLanes-th from tokenFrom + laneShare): the logits,
  // the running maximum and p in registers, then p · v (a group's lanes hold the same logits after the
  // shuffles); at the end the groups' maxima meet in `tile` (free then) and each group's state is rescaled
  // to the largest.
  const groupLoop = `for (var base = tokenFrom; base < tokenTo; base = base + ${groupsOfLanes}u) {
      let j = base + laneShare;
      let live = j < tokenTo;
      var row = 0u;
      if (live) { row = poolRow(kvSlotAt(kvStart + j), h, params.kvHeads, params.pageSize); }
      ${laneDots}
      var weights: array<f32, ${R}>;
      for (var r = 0u; r < ${R}u; r = r + 1u) {
        let p = kvLen - qLen + (rowBase + r) / groupSize;
        let logit = select(${NEG}, softcapped(dots[r] * params.scale), ${visibleOf('live')});
        if (logit > top[r]) {
          let f = exp(top[r] - logit);
          sums[r] = sums[r] * f;
          for (var x = 0u; x < ${laneValues}u; x = x + 1u) { acc[r * ${laneValues}u + x] = acc[r * ${laneValues}u + x] * f; }
          top[r] = logit;
        }
        weights[r] = select(exp(logit - top[r]), 0.0, logit <= ${NEG});
        sums[r] = sums[r] + weights[r];
      }
      for (var s = 0u; s < ${UPL}u; s = s + 1u) {
        let u = column + s * ${L}u;
        if (live && u < ${valueUnits}u) {
          let v = unitValues_v(row, u, vScale);
          for (var r = 0u; r < ${R}u; r = r + 1u) {
            for (var x = 0u; x < ${E}u; x = x + 1u) { acc[r * ${laneValues}u + s * ${E}u + x] = acc[r * ${laneValues}u + s * ${E}u + x] + weights[r] * v[x]; }
          }
        }
      }
    }
    if (column == 0u) {
      for (var r = 0u; r < ${R}u; r = r + 1u) { tile[laneShare * ${R}u + r] = top[r]; }
    }
    workgroupBarrier();
    for (var r = 0u; r < ${R}u; r = r + 1u) {
      var largest = ${NEG};
      for (var g = 0u; g < ${groupsOfLanes}u; g = g + 1u) { largest = max(largest, tile[g * ${R}u + r]); }
      let f = exp(top[r] - largest);
      sums[r] = sums[r] * f;
      for (var x = 0u; x < ${laneValues}u; x = x + 1u) { acc[r * ${laneValues}u + x] = acc[r * ${laneValues}u + x] * f; }
      if (lane == 0u) { rowMax[r] = largest; }
    }`;
  const tileBody = `      ${(plan.kRead === 'lanes' ? logitsByLanes : logitsByRow).replace('LOGIT_STEP', logitStep)}
      // 2. The tile's maximum of each row.
      for (var r = 0u; r < ${R}u; r = r + 1u) {
        ${plan.tileMax === 'subgroup' ? `let top = subgroupMax(logits[r]);
        if (subgroupLane == 0u) { atomicMax(&tileMaxKeys[r], orderKey(top)); }` : 'atomicMax(&tileMaxKeys[r], orderKey(logits[r]));'}
      }
      workgroupBarrier();
      if (lane < ${R}u) {
        let before = rowMax[lane];
        let now = max(before, keyValue(atomicLoad(&tileMaxKeys[lane])));
        // Only this invocation reads the key: it may clear it for the next tile at once.
        atomicStore(&tileMaxKeys[lane], 0u);
        rowRescale[lane] = exp(before - now);
        rowMax[lane] = now;
      }
      workgroupBarrier();
      // 3. p = exp(logit - max), then p · v into the lanes' columns.
      for (var r = 0u; r < ${R}u; r = r + 1u) {
        tile[r * ${T}u + lane] = select(exp(logits[r] - rowMax[r]), 0.0, logits[r] <= ${NEG});
      }
      workgroupBarrier();
      for (var r = 0u; r < ${R}u; r = r + 1u) {
        let f = rowRescale[r];
        sums[r] = sums[r] * f;
        for (var x = 0u; x < ${laneValues}u; x = x + 1u) { acc[r * ${laneValues}u + x] = acc[r * ${laneValues}u + x] * f; }
      }
      let count = min(${T}u, tokenTo - t0);
      for (var step = 0u; step < ${T / groupsOfLanes}u; step = step + 1u) {
        let t = laneShare + step * ${groupsOfLanes}u;
        if (t >= count) { break; }
        let row = tileSlots[t];
        for (var s = 0u; s < ${UPL}u; s = s + 1u) {
          let u = column + s * ${L}u;
          if (u < ${valueUnits}u) {
            let v = unitValues_v(row, u, vScale);
            for (var r = 0u; r < ${R}u; r = r + 1u) {
              let p = tile[r * ${T}u + t];
              for (var x = 0u; x < ${E}u; x = x + 1u) { acc[r * ${laneValues}u + s * ${E}u + x] = acc[r * ${laneValues}u + s * ${E}u + x] + p * v[x]; }
            }
          }
        }
        for (var r = 0u; r < ${R}u; r = r + 1u) { sums[r] = sums[r] + tile[r * ${T}u + t]; }
      }
      workgroupBarrier();`;
  const tileLoop = `for (var t0 = tokenFrom; t0 < tokenTo; t0 = t0 + ${T}u) {
${tileBody}
    }`;
  const code = `${subgroups ? 'enable subgroups;\n' : ''}${halfFloatWgsl(plan.f16)}
${INDEX_RANGE_WGSL}
${fp8 ? FP8_WGSL : ''}
${PAGED_ATTENTION.uniformsWgsl}
${bindings.wgsl}
${packedIndex('qIndptrAt', 'params.qIndptrAt', plan.qIndptrType)}
${packedIndex('kvIndptrAt', 'params.kvIndptrAt', plan.kvIndptrType)}
${packedIndex('kvSlotAt', 'params.kvSlotsAt', plan.slotType)}
${elementReader('qValue', 'q', plan.qType)}
${poolRowWgsl(plan.layout)}
${unitReader('k', 'kPool', plan.poolType, D, units)}
${unitReader('v', 'vPool', plan.poolType, D, units)}
${plan.atomicOut ? HALF_STORER : ''}

var<workgroup> qRows: array<${quad ? 'vec4<f32>' : 'f32'}, ${quad ? (R * D) / 4 : R * D}>;
var<workgroup> tile: array<f32, ${R * T}>;
var<workgroup> tileMaxKeys: array<atomic<u32>, ${R}>;
var<workgroup> tileSlots: array<u32, ${T}>;
var<workgroup> rowMax: array<f32, ${R}>;
var<workgroup> rowRescale: array<f32, ${R}>;
var<workgroup> rowSum: array<f32, ${R}>;
var<workgroup> pieceA: vec4<u32>;
var<workgroup> pieceB: vec4<u32>;
var<workgroup> pieceC: vec4<u32>;

// f32 as a u32 key in the order of the floats, so atomicMax finds the largest; 0 is below every key.
fn orderKey(x: f32) -> u32 {
  let b = bitcast<u32>(x);
  return select(b | 0x80000000u, ~b, (b & 0x80000000u) != 0u);
}
fn keyValue(k: u32) -> f32 { return bitcast<f32>(select(~k, k & 0x7fffffffu, (k & 0x80000000u) != 0u)); }

fn softcapped(x: f32) -> f32 {
  if (params.logitSoftcap > 0.0) { return params.logitSoftcap * tanh(x / params.logitSoftcap); }
  return x;
}

@compute @workgroup_size(${T})
fn main(${ENTRY_BUILTINS}${subgroups ? ', @builtin(subgroup_invocation_id) subgroupLane: u32' : ''}) {
  ${LINEAR_WORKGROUP}
  let passSlot = linearWorkgroup % params.passSlots;
  let piece = linearWorkgroup / params.passSlots / params.kvHeads;
  let h = (linearWorkgroup / params.passSlots) % params.kvHeads;
  let groupSize = params.queryHeads / params.kvHeads;
  if (lane == 0u) {
    // The request of this piece: the last b with floor(kvIndptr[b] / span) + b <= piece.
    var live = params.requests > 0u && piece < params.pieces && !${CALL_REJECTED};
    var lo = 0u;
    var hi = params.requests;
    while (live && hi - lo > 1u) {
      let mid = (lo + hi) / 2u;
      if (kvIndptrAt(mid) / params.tokensPerSplit + mid <= piece) { lo = mid; } else { hi = mid; }
    }
    let b = lo;
    let kvStart = kvIndptrAt(b);
    let kvEnd = kvIndptrAt(b + 1u);
    let qStart = qIndptrAt(b);
    let qLen = qIndptrAt(b + 1u) - qStart;
    let span = piece - b;
    let firstSpan = kvStart / params.tokensPerSplit;
    live = live && kvEnd > kvStart && qLen > 0u && span >= firstSpan && span <= (kvEnd - 1u) / params.tokensPerSplit;
    let pieces = select(1u, (kvEnd - 1u) / params.tokensPerSplit - firstSpan + 1u, kvEnd > kvStart);
    let split = pieces > 1u && qLen <= params.splitQueries;
    let kvLen = kvEnd - kvStart;
    // Split: this piece's tokens, passes slot, slot + slots, ... Not split: every token, and the passes spread over the pieces too.
    let j0 = select(0u, max(kvStart, span * params.tokensPerSplit) - kvStart, split);
    let j1 = select(kvLen, min(kvEnd, (span + 1u) * params.tokensPerSplit) - kvStart, split);
    let k = span - firstSpan;
    pieceA = vec4<u32>(qStart, select(0u, qLen, live), kvStart, kvLen);
    pieceB = vec4<u32>(j0, j1, select(k, 0u, split) * params.passSlots + passSlot, select(pieces, 1u, split) * params.passSlots);
    pieceC = vec4<u32>(select(0u, 1u, split), b, 0u, 0u);
  }
  let a = workgroupUniformLoad(&pieceA);
  let bounds = workgroupUniformLoad(&pieceB);
  let c = workgroupUniformLoad(&pieceC);
  let qStart = a.x;
  let qLen = a.y;
  let kvStart = a.z;
  let kvLen = a.w;
  let split = c.x == 1u;
  let rowsTotal = qLen * groupSize;
  let passes = (rowsTotal + ${R - 1}u) / ${R}u;
  let kScale = ${scaleOf('k')};
  let vScale = ${scaleOf('v')};
  let column = lane % ${L}u;
  let laneShare = lane / ${L}u;
  for (var rowPass = bounds.z; rowPass < passes; rowPass = rowPass + bounds.w) {
    let rowBase = rowPass * ${R}u;
    let rowsHere = min(${R}u, rowsTotal - rowBase);
    for (var e = lane; e < ${R * D}u; e = e + ${T}u) {
      let r = e / ${D}u;
      let d = e % ${D}u;
      var x = 0.0;
      if (r < rowsHere) {
        let row = rowBase + r;
        let n = qStart + row / groupSize;
        let hq = h * groupSize + row % groupSize;
        x = qValue((n * params.queryHeads + hq) * ${D}u + d);
      }
      ${qAt('e')} = x;
    }
    if (lane < ${R}u) {
      rowMax[lane] = ${NEG};
      rowSum[lane] = 0.0;
      atomicStore(&tileMaxKeys[lane], 0u);
    }
    // The tokens any row of this pass sees (rows are query-major: positions rise with the row).
    let firstPos = kvLen - qLen + rowBase / groupSize;
    let lastPos = kvLen - qLen + (rowBase + rowsHere - 1u) / groupSize;
    var seenFrom = 0u;
    if (params.slidingWindow > 0u && firstPos + 1u > params.slidingWindow) { seenFrom = firstPos + 1u - params.slidingWindow; }
    let seenTo = select(kvLen, lastPos + 1u, params.causal == 1u);
    let tokenFrom = max(bounds.x, seenFrom);
    let tokenTo = min(bounds.y, seenTo);
    var acc: array<f32, ${R * laneValues}>;
    for (var i = 0u; i < ${R * laneValues}u; i = i + 1u) { acc[i] = 0.0; }
    var sums: array<f32, ${R}>;
    for (var r = 0u; r < ${R}u; r = r + 1u) { sums[r] = 0.0; }${plan.softmax === 'group' ? `
    var top: array<f32, ${R}>;
    for (var r = 0u; r < ${R}u; r = r + 1u) { top[r] = ${NEG}; }` : ''}
    workgroupBarrier();
    ${plan.softmax === 'group' ? groupLoop : tileLoop}
    // The shares of the lanes, added share after share into qRows (q is done with) and rowSum.
    for (var g = 0u; g < ${groupsOfLanes}u; g = g + 1u) {
      if (laneShare == g) {
        for (var s = 0u; s < ${UPL}u; s = s + 1u) {
          let u = column + s * ${L}u;
          if (u < ${valueUnits}u) {
            for (var r = 0u; r < ${R}u; r = r + 1u) {
              for (var x = 0u; x < ${E}u; x = x + 1u) {
                let at = r * ${D}u + u * ${E}u + x;
                let v = acc[r * ${laneValues}u + s * ${E}u + x];
                ${qAt('at')} = select(${qAt('at')} + v, v, g == 0u);
              }
            }
          }
        }
        if (column == 0u) {
          for (var r = 0u; r < ${R}u; r = r + 1u) { rowSum[r] = rowSum[r] + sums[r]; }
        }
      }
      workgroupBarrier();
    }
    for (var r = 0u; r < rowsHere; r = r + 1u) {
      let row = rowBase + r;
      let i = row / groupSize;
      let hq = h * groupSize + row % groupSize;
      let total = rowSum[r];
      let norm = select(1.0 / total, 0.0, total == 0.0);
      let rowLse = select(rowMax[r] + log(total), ${NEG}, total == 0.0);
      if (split) {
        let slotRow = ((piece * params.splitQueries + i) * params.queryHeads + hq);
        for (var d = lane; d < ${Dv}u; d = d + ${T}u) { partial[slotRow * ${Dv}u + d] = ${qAt(`r * ${D}u + d`)} * norm; }
        if (lane == 0u) { partial[params.partialLseAt + slotRow] = rowLse; }
      } else {
        let n = qStart + i;
        let first = (n * params.queryHeads + hq) * ${Dv}u;
        ${outStores(plan.qType, Dv, plan.atomicOut, 'first', (d) => `${qAt(`r * ${D}u + ${d}`)} * norm`, 'lane', T)}
        if (lane == 0u) { lse[n * params.queryHeads + hq] = rowLse; }
      }
    }
    workgroupBarrier();
  }
}
`;
  return kernelSource(PAGED_ATTENTION, bindings, code);
}

export function pagedAttentionMergeShader(plan: PagedAttentionMergePlan): KernelSource<PagedAttentionMergeParams, PagedAttentionMergeRanges> {
  const { headDim: D, workgroupSize: W } = plan;
  const bindings = PAGED_ATTENTION_MERGE.bindings({ Out: plan.atomicOut ? 'atomic<u32>' : 'u32' });
  const code = `${halfFloatWgsl(plan.f16)}
${PAGED_ATTENTION_MERGE.uniformsWgsl}
${bindings.wgsl}
${packedIndex('qIndptrAt', 'params.qIndptrAt', plan.qIndptrType)}
${packedIndex('kvIndptrAt', 'params.kvIndptrAt', plan.kvIndptrType)}
${plan.atomicOut ? HALF_STORER : ''}

@compute @workgroup_size(${W})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let n = linearWorkgroup / params.queryHeads;
  let hq = linearWorkgroup % params.queryHeads;
  if (n >= params.tokens || params.requests == 0u || ${CALL_REJECTED}) { return; }
  // The request of query n: the last b with qIndptr[b] <= n.
  var lo = 0u;
  var hi = params.requests;
  while (hi - lo > 1u) {
    let mid = (lo + hi) / 2u;
    if (qIndptrAt(mid) <= n) { lo = mid; } else { hi = mid; }
  }
  let b = lo;
  let qStart = qIndptrAt(b);
  let qLen = qIndptrAt(b + 1u) - qStart;
  let kvStart = kvIndptrAt(b);
  let kvEnd = kvIndptrAt(b + 1u);
  if (kvEnd <= kvStart) { return; }
  let firstSpan = kvStart / params.tokensPerSplit;
  let pieces = (kvEnd - 1u) / params.tokensPerSplit - firstSpan + 1u;
  if (pieces < 2u || qLen > params.splitQueries) { return; }
  let i = n - qStart;
  var top = -3.0e38;
  for (var k = 0u; k < pieces; k = k + 1u) {
    let at = ((firstSpan + k + b) * params.splitQueries + i) * params.queryHeads + hq;
    top = max(top, partial[params.partialLseAt + at]);
  }
  var total = 0.0;
  for (var k = 0u; k < pieces; k = k + 1u) {
    let at = ((firstSpan + k + b) * params.splitQueries + i) * params.queryHeads + hq;
    total = total + exp(partial[params.partialLseAt + at] - top);
  }
  let first = (n * params.queryHeads + hq) * ${D}u;
  ${outStores(plan.qType, D, plan.atomicOut, 'first', (d) => `merged(${d}, b, i, hq, firstSpan, pieces, top, total)`, 'lane', W)}
  if (lane == 0u) { lse[n * params.queryHeads + hq] = top + log(total); }
}

fn merged(d: u32, b: u32, i: u32, hq: u32, firstSpan: u32, pieces: u32, top: f32, total: f32) -> f32 {
  var x = 0.0;
  for (var k = 0u; k < pieces; k = k + 1u) {
    let at = ((firstSpan + k + b) * params.splitQueries + i) * params.queryHeads + hq;
    x = x + exp(partial[params.partialLseAt + at] - top) * partial[at * ${D}u + d];
  }
  return x / total;
}
`;
  return kernelSource(PAGED_ATTENTION_MERGE, bindings, code);
}

/**
 * The offsets rules of one call: entry i of each indptr against entry i - 1
 * (entry 0 against 0, the last against the total), and each request's qLen
 * against its kvLen. A break raises its rule's word to 0xffffffff − i with
 * atomicMax, so the word names the first entry that breaks (the host reads
 * the entries there to tell which way), and the call's word.
 */
export function checkSegmentsShader(plan: CheckSegmentsPlan): KernelSource<CheckSegmentsParams, CheckSegmentsRanges> {
  const bindings = CHECK_SEGMENTS.bindings();
  const code = `${INDEX_RANGE_WGSL}
${CHECK_SEGMENTS.uniformsWgsl}
${bindings.wgsl}
${indexReader('qAt', 'qIndptr', plan.qIndptrType)}
${indexReader('kvAt', 'kvIndptr', plan.kvIndptrType)}

fn raise(word: u32, i: u32) {
  atomicMax(&flags[word], 0xffffffffu - i);
  atomicMax(&flags[params.callFlag], 1u);
}

// Signed comparison of two (low, high) index words.
fn below(a: vec2<u32>, b: vec2<u32>) -> bool {
  let ah = bitcast<i32>(a.y);
  let bh = bitcast<i32>(b.y);
  return ah < bh || (ah == bh && a.x < b.x);
}

fn offsetsBreak(v: vec2<u32>, before: vec2<u32>, i: u32, total: u32) -> bool {
  if (i == 0u) { return v.x != 0u || v.y != 0u; }
  if (below(v, before)) { return true; }
  return i + 1u == params.entries && (v.x != total || v.y != 0u);
}

@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let i = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (i >= params.entries) { return; }
  let q = qAt(i);
  let kv = kvAt(i);
  let qBefore = qAt(max(i, 1u) - 1u);
  let kvBefore = kvAt(max(i, 1u) - 1u);
  if (offsetsBreak(q, qBefore, i, params.qTotal)) { raise(params.qFlag, i); }
  if (offsetsBreak(kv, kvBefore, i, params.kvTotal)) { raise(params.kvFlag, i); }
  if (i + 1u < params.entries) {
    // Only meaningful where both rules hold; the host reports the offsets rules first.
    let qLen = bitcast<i32>(qAt(i + 1u).x) - bitcast<i32>(q.x);
    let kvLen = bitcast<i32>(kvAt(i + 1u).x) - bitcast<i32>(kv.x);
    if (qLen > kvLen) { raise(params.withinFlag, i); }
  }
}
`;
  return kernelSource(CHECK_SEGMENTS, bindings, code);
}
