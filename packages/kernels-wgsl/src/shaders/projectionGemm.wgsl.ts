/**
 * The materializer's projection, C[M, N] = A[M, K] · W[N, K]^T (both operands
 * K-contiguous, as ctxHidden and the PyTorch-layout kvWeight are), f32
 * accumulation, each result rounded once to the dtype.
 *
 * 256 invocations (16 × 16) own a tileM × 128 tile of C; each holds
 * tileM/16 × 8 accumulators in registers. K advances tileK at a time through
 * two workgroup-memory buffers: while one is read, the next tile's global
 * loads (vec4<u32> where rows are 16-byte aligned, f16/bf16 widened to f32 on
 * the way in) sit in registers, so one barrier per step suffices. Each
 * thread's rows and columns are two groups of four, 64 apart, so its vec4
 * reads of workgroup memory do not collide on banks.
 */
import { GEMM, GEMM_REDUCE } from '../generated/params.js';
import type { GemmParams, GemmRanges, GemmReduceParams, GemmReduceRanges } from '../generated/params.js';
import { elementReader, ENTRY_BUILTINS, halfFloatWgsl, LINEAR_WORKGROUP, packWord, wordValues } from './common.wgsl.js';
import type { GemmPlan, GemmReducePlan } from './plan.js';
import { kernelSource } from './source.js';
import type { KernelSource } from './source.js';

const THREADS = 256;

/** Row (or column) of the tile owned by thread `t` (0..15) for its i-th of `count` rows. */
function tileOffset(count: number, t: string, i: number): string {
  if (count >= 4) return `${Math.floor(i / 4) * 64 + (i % 4)}u + ${t} * 4u`;
  return `${t} * ${count}u + ${i}u`;
}

/**
 * Workgroup w takes tile w % tiles and split w / tiles of K. With one split the
 * tile is rounded into C; with several (a plan with `partial`), each writes f32
 * partial sums to its own [rows, cols] slab, and gemmReduceShader adds them.
 */
export function projectionGemmShader(plan: GemmPlan): KernelSource<GemmParams, GemmRanges> {
  const { dtype, tileM: BM, tileN: BN, tileK: BK } = plan;
  const TM = BM / 16;
  const TN = BN / 16;
  const perWord = dtype === 'f32' ? 1 : 2;
  const perVec = plan.vectorLoads ? 4 * perWord : 1;
  const bindings = GEMM.bindings({ Operand: plan.vectorLoads ? 'vec4<u32>' : 'u32' });

  // Loads of one K step: `count` rows of the operand, BK elements each, bound for workgroup buffer `fill`.
  const loadsOf = (name: 'a' | 'w', count: number) => {
    const limit = name === 'a' ? 'params.rows' : 'params.cols';
    const first = name === 'a' ? 'rowBase' : 'colBase';
    const shared = name === 'a' ? 'tileA' : 'tileW';
    const units = (count * BK) / perVec;
    if (!plan.vectorLoads) {
      // Rows not 16-byte aligned: element by element, straight into workgroup memory.
      const load = `for (var q = lane; q < ${units}u; q += ${THREADS}u) {
      let row = q / ${BK}u;
      let kk = q % ${BK}u;
      let g = ${first} + row;
      let k = k0 + kk;
      let inside = g < ${limit} && k < kEnd;
      let v = ${name}At(select(0u, g * params.depth + k, inside));
      let at = (fill * ${BK}u + kk) * ${count}u + row;
      ${shared}[at / 4u][at % 4u] = select(0.0, v, inside);
    }`;
      return { decl: [] as string[], load: [load], store: [] as string[] };
    }
    const perThread = Math.ceil(units / THREADS);
    const decl: string[] = [];
    const load: string[] = [];
    const store: string[] = [];
    for (let q = 0; q < perThread; q++) {
      const u = `${name}u${q}`;
      const reg = `${name}r${q}`;
      decl.push(`var ${reg}: vec4<u32>;`);
      load.push(`{
      let ${u} = lane + ${q * THREADS}u;
      let row = ${u} / ${BK / perVec}u;
      let k = k0 + (${u} % ${BK / perVec}u) * ${perVec}u;
      let g = ${first} + row;
      let inside = ${u} < ${units}u && g < ${limit} && k < kEnd;
      ${reg} = select(vec4<u32>(), ${name}[select(0u, (g * params.depth + k) / ${perVec}u, inside)], inside);
    }`);
      const values = ['x', 'y', 'z', 'w'].flatMap((comp) => wordValues(dtype, `${reg}.${comp}`));
      store.push(`if (lane + ${q * THREADS}u < ${units}u) {
      let ${u} = lane + ${q * THREADS}u;
      let row = ${u} / ${BK / perVec}u;
      let kk = (${u} % ${BK / perVec}u) * ${perVec}u;
      ${values.map((v, i) => `{ let at = (fill * ${BK}u + kk + ${i}u) * ${count}u + row; ${shared}[at / 4u][at % 4u] = ${v}; }`).join('\n      ')}
    }`);
    }
    return { decl, load, store };
  };
  const A = loadsOf('a', BM);
  const W = loadsOf('w', BN);

  const accName = (i: number, g: number) => `acc${i}_${g}`;
  const groupsN = TN / 4;
  const accDecl: string[] = [];
  for (let i = 0; i < TM; i++) for (let g = 0; g < groupsN; g++) accDecl.push(`var ${accName(i, g)} = vec4<f32>();`);

  const step: string[] = [];
  for (let kk = 0; kk < BK; kk++) {
    const aBase = `(buffer * ${BK}u + ${kk}u) * ${BM / 4}u`;
    const wBase = `(buffer * ${BK}u + ${kk}u) * ${BN / 4}u`;
    const b = Array.from({ length: groupsN }, (_, g) => `let b${kk}_${g} = tileW[${wBase} + ${g * 16}u + tx];`);
    const a: string[] = [];
    if (TM >= 4) {
      for (let i = 0; i < TM; i += 4) {
        a.push(`let a${kk}_g${i} = tileA[${aBase} + ${(i / 4) * 16}u + ty];`);
        for (let q = 0; q < 4; q++) a.push(`let a${kk}_${i + q} = a${kk}_g${i}.${'xyzw'[q]};`);
      }
    } else {
      for (let i = 0; i < TM; i++) a.push(`let a${kk}_${i} = tileA[(${aBase}) + (ty * ${TM}u + ${i}u) / 4u][(ty * ${TM}u + ${i}u) % 4u];`);
    }
    const fmas: string[] = [];
    for (let i = 0; i < TM; i++) for (let g = 0; g < groupsN; g++) fmas.push(`${accName(i, g)} = fma(vec4<f32>(a${kk}_${i}), b${kk}_${g}, ${accName(i, g)});`);
    step.push([...a, ...b, ...fmas].join('\n      '));
  }

  const writes: string[] = [];
  for (let i = 0; i < TM; i++) {
    writes.push(`{
    let m = rowBase + ${tileOffset(TM, 'ty', i)};
    if (m < params.rows) {`);
    for (let g = 0; g < groupsN; g++) {
      const acc = accName(i, g);
      const comps = ['x', 'y', 'z', 'w'].map((q) => `${acc}.${q}`);
      if (plan.partial) {
        for (let q = 0; q < 4; q++) writes.push(`      if (colBase + ${g * 64 + q}u + tx * 4u < params.cols) { c[(split * params.rows + m) * params.cols + colBase + ${g * 64 + q}u + tx * 4u] = bitcast<u32>(${comps[q]}); }`);
      } else if (dtype === 'f32') {
        for (let q = 0; q < 4; q++) writes.push(`      if (colBase + ${g * 64 + q}u + tx * 4u < params.cols) { c[m * params.cols + colBase + ${g * 64 + q}u + tx * 4u] = bitcast<u32>(${comps[q]}); }`);
      } else {
        // N is even (2·H·D per layer) and so is every column pair's first column: whole words.
        for (let q = 0; q < 4; q += 2) {
          writes.push(`      if (colBase + ${g * 64 + q}u + tx * 4u < params.cols) { c[(m * params.cols + colBase + ${g * 64 + q}u + tx * 4u) / 2u] = ${packWord(dtype, [comps[q]!, comps[q + 1]!])}; }`);
        }
      }
    }
    writes.push('    }\n  }');
  }

  const code = `${halfFloatWgsl(plan.f16)}
${GEMM.uniformsWgsl}
${bindings.wgsl}
${plan.vectorLoads ? '' : `${elementReader('aAt', 'a', dtype)}\n${elementReader('wAt', 'w', dtype)}`}

// Workgroup memory laid out [buffer][k][row]: a K step of the tile, transposed.
var<workgroup> tileA: array<vec4<f32>, ${(2 * BK * BM) / 4}>;
var<workgroup> tileW: array<vec4<f32>, ${(2 * BK * BN) / 4}>;

@compute @workgroup_size(${THREADS})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let tx = lane % 16u;
  let ty = lane / 16u;
  let split = linearWorkgroup / params.tiles;
  let tile = linearWorkgroup % params.tiles;
  let rowBase = (tile / params.tilesN) * ${BM}u;
  let colBase = (tile % params.tilesN) * ${BN}u;
  let kBegin = split * params.kPerSplit;
  let kEnd = min(params.depth, kBegin + params.kPerSplit);
  let steps = select(0u, (kEnd - kBegin + ${BK - 1}u) / ${BK}u, kEnd > kBegin);
  ${accDecl.join('\n  ')}
  ${[...A.decl, ...W.decl].join('\n  ')}
  var k0 = kBegin;
  var buffer = 0u;
  var fill = 0u;
  ${[...A.load, ...W.load].join('\n  ')}
  ${[...A.store, ...W.store].join('\n  ')}
  workgroupBarrier();
  for (var s = 0u; s < steps; s++) {
    let more = s + 1u < steps;
    k0 = kBegin + (s + 1u) * ${BK}u;
    fill = 1u - buffer;
    if (more) {
      ${[...A.load, ...W.load].join('\n      ')}
    }
    {
      ${step.join('\n      ')}
    }
    buffer = 1u - buffer;
    if (more) {
      ${[...A.store, ...W.store].join('\n      ')}
    }
    workgroupBarrier();
  }
  ${writes.join('\n  ')}
}
`;
  return kernelSource(GEMM, bindings, code);
}

/** Sums the f32 partial slabs of a split-K GEMM and rounds each result once into C (one invocation per u32 word of C). */
export function gemmReduceShader(plan: GemmReducePlan): KernelSource<GemmReduceParams, GemmReduceRanges> {
  const bindings = GEMM_REDUCE.bindings();
  const perWord = plan.dtype === 'f32' ? 1 : 2;
  const sums = Array.from({ length: perWord }, (_, i) => `sum${i}`);
  const code = `${halfFloatWgsl(plan.f16)}
${GEMM_REDUCE.uniformsWgsl}
${bindings.wgsl}
@compute @workgroup_size(${plan.workgroupSize})
fn main(${ENTRY_BUILTINS}) {
  ${LINEAR_WORKGROUP}
  let word = linearWorkgroup * ${plan.workgroupSize}u + lane;
  if (word >= params.words) { return; }
  ${sums.map((name) => `var ${name} = 0.0;`).join('\n  ')}
  for (var s = 0u; s < params.splits; s++) {
    ${sums.map((name, i) => `${name} += partial[s * params.elements + word * ${perWord}u + ${i}u];`).join('\n    ')}
  }
  c[word] = ${packWord(plan.dtype, sums)};
}
`;
  return kernelSource(GEMM_REDUCE, bindings, code);
}
