import type { FloatDType } from '@kvkit/contracts';
import { describe, expect, it } from 'vitest';
import { INTEGER_F16 } from '../src/shaders/common.wgsl.js';
import { normRopeShader } from '../src/shaders/fusedNormRopeStacked.wgsl.js';
import { planGemm, planGemmReduce, rowLayout, planNormRope, planRopeNormRows, planRopeRows, planRopeTable, planSlotOwners, planStridedCopy } from '../src/shaders/plan.js';
import type { DeviceCaps, KernelPlan, RopeStyle } from '../src/shaders/plan.js';
import { gemmReduceShader, projectionGemmShader } from '../src/shaders/projectionGemm.wgsl.js';
import { ropeNormRowsShader } from '../src/shaders/ropeNormRows.wgsl.js';
import { ropeRowsShader } from '../src/shaders/ropePoolFused.wgsl.js';
import { ropeTableShader } from '../src/shaders/ropeTable.wgsl.js';

/**
 * Every device the backend takes offers at least WebGPU's default limits (16 KiB
 * of workgroup memory, 256 invocations and 256 along x a workgroup), with or
 * without subgroups of any size the spec allows (4 to 128); larger GPUs offer
 * more (the H200 through Dawn: 1024 invocations, 32 KiB).
 */
const base = { maxStorageBuffersPerStage: 8, f16: INTEGER_F16 };
const DEVICES: readonly (DeviceCaps & { readonly name: string })[] = [
  { name: 'default limits, no subgroups', subgroups: false, subgroupMinSize: 0, maxWorkgroupStorageBytes: 16384, maxInvocationsPerWorkgroup: 256, ...base },
  ...[4, 8, 16, 32, 64, 128].map((size) => ({ name: `default limits, subgroups of ${size}`, subgroups: true, subgroupMinSize: size, maxWorkgroupStorageBytes: 16384, maxInvocationsPerWorkgroup: 256, ...base })),
  { name: 'H200', subgroups: true, subgroupMinSize: 32, maxWorkgroupStorageBytes: 32768, maxInvocationsPerWorkgroup: 1024, ...base, maxStorageBuffersPerStage: 10 },
];

/** WebGPU's floor for maxComputeWorkgroupSizeX, which the plans do not read: no workgroup may be wider. */
const MAX_WORKGROUP_X = 256;

interface Declared {
  readonly workgroupSize: number;
  readonly workgroupBytes: number;
}

/** What a shader declares: its workgroup size and the bytes of its workgroup arrays. */
function declared(code: string): Declared {
  const sizes = [...code.matchAll(/@workgroup_size\((\d+)\)/g)].map((m) => Number(m[1]));
  if (sizes.length !== 1) throw new Error(`expected one entry point, found ${sizes.length}`);
  const bytesOf: Record<string, number> = { f32: 4, u32: 4, 'atomic<u32>': 4, 'vec4<f32>': 16, 'vec4<u32>': 16 };
  let workgroupBytes = 0;
  for (const m of code.matchAll(/var<workgroup>\s+\w+\s*:\s*array<([\w<>]+),\s*(\d+)>/g)) {
    const size = bytesOf[m[1]!];
    if (size === undefined) throw new Error(`workgroup array of ${m[1]}`);
    workgroupBytes += size * Number(m[2]);
  }
  return { workgroupSize: sizes[0]!, workgroupBytes };
}

/** What keeps a plan's kernel from being a legal launch on `caps`, one line each. */
function launchProblems(caps: DeviceCaps, plan: KernelPlan, shader: Declared | undefined): string[] {
  const problems: string[] = [];
  const need = (ok: boolean, what: () => string) => {
    if (!ok) problems.push(what());
  };
  const size = plan.kernel === 'gemm' ? 256 : plan.workgroupSize;
  need(size >= 1 && size <= caps.maxInvocationsPerWorkgroup && size <= MAX_WORKGROUP_X, () => `workgroup of ${size}`);
  if ('lanesPerRow' in plan) {
    need((plan.lanesPerRow & (plan.lanesPerRow - 1)) === 0 && plan.workgroupSize % plan.lanesPerRow === 0, () => `${plan.lanesPerRow} lanes a row in ${plan.workgroupSize}`);
    need(plan.lanesPerRow * plan.vecsPerLane >= plan.layout.rowVecs, () => `${plan.lanesPerRow} × ${plan.vecsPerLane} vectors for ${plan.layout.rowVecs}`);
    need(plan.reduction !== 'none' || plan.lanesPerRow === 1, () => 'lanes without a reduction');
    // A row's lanes meet in one subgroup only where every subgroup holds whole rows.
    need(plan.reduction !== 'subgroup' || (caps.subgroups && plan.lanesPerRow <= caps.subgroupMinSize), () => `subgroup reduction of ${plan.lanesPerRow} lanes`);
  }
  if (shader !== undefined) {
    need(shader.workgroupSize === size, () => `shader workgroup ${shader.workgroupSize}, plan ${size}`);
    need(shader.workgroupBytes <= caps.maxWorkgroupStorageBytes, () => `${shader.workgroupBytes} B of workgroup memory`);
  }
  return problems;
}

/**
 * The contracts accept any D ≥ 2 and any even R ≤ D. A plan reads D (with the
 * dtype) through the row layout, vectors of 1, 2 or 4 words or elements, which
 * sets the lanes a row; every D to 600 takes each layout at every lane count
 * (32 lanes from 32 vectors on), and a larger D only adds vectors a lane,
 * which the few beyond stand for. It reads R (with the style) only for where a
 * rotation partner lives: neox's R/2 a whole number of vectors or not, so
 * R = 2, the least R of whole vectors and R = D take every partner mode a D has.
 */
describe('WGSL launch plans over the whole domain of the contracts', () => {
  const dtypes: readonly FloatDType[] = ['f32', 'f16', 'bf16'];
  const styles: readonly RopeStyle[] = ['neox', 'gptj'];
  const headDims = [...Array.from({ length: 599 }, (_, i) => i + 2), 1024, 4096, 65536];

  it('fit every device for every dtype, head dim, rotary dim and style: row kernels', () => {
    const failures: string[] = [];
    const built = new Map<string, Declared>();
    /** What the kernel's WGSL declares, built once per launch shape: its workgroup size and memory follow from these fields alone. */
    const shaderOf = (plan: KernelPlan, shape: string, build: () => string) => {
      const key = `${plan.kernel} ${shape}`;
      const known = built.get(key);
      if (known) return known;
      const d = declared(build());
      built.set(key, d);
      return d;
    };
    let plans = 0;
    for (const caps of DEVICES) {
      for (const dtype of dtypes) {
        for (const D of headDims) {
          const E = rowLayout(dtype, D).elements;
          for (const R of new Set([2, 2 * E, D - (D % 2)].filter((r) => r <= D))) {
            for (const style of styles) {
              const fail = (problems: string[], what: string) => {
                if (problems.length > 0 && failures.length < 20) failures.push(`${caps.name}: ${what} ${dtype} D=${D} R=${R} ${style}: ${problems.join('; ')}`);
              };
              const norm = planNormRope(caps, { kvType: dtype, weightType: dtype, cacheType: 'f32', positionType: 'i32', slotType: undefined, D, R, style, ropeSource: 'cache', epsInWeights: false });
              const normShape = `${caps.subgroups} ${norm.workgroupSize} ${norm.reduction}`;
              fail(launchProblems(caps, norm, shaderOf(norm, normShape, () => normRopeShader(norm).code)), 'fusedNormRopeStacked');
              const rows = planRopeRows(caps, { dtype, D, R, style, kind: 'all', slotType: 'i32' });
              fail(launchProblems(caps, rows, shaderOf(rows, `${rows.workgroupSize}`, () => ropeRowsShader(rows).code)), 'ropePoolFused');
              const normed = planRopeNormRows(caps, { dtype, D, R, style, queries: true, keys: true, values: true, queryWeight: dtype, keyWeight: dtype, slotType: 'i32' });
              const normedShape = `${caps.subgroups} ${normed.workgroupSize} ${normed.reduction}`;
              fail(launchProblems(caps, normed, shaderOf(normed, normedShape, () => ropeNormRowsShader(normed).code)), 'ropePoolFused with Q/K-norm');
              plans += 3;
            }
          }
        }
      }
    }
    expect(failures).toEqual([]);
    console.log(`${plans} plans, ${built.size} shaders`);
  });

  it('fit every device for every token count and depth the GEMM tiles branch on, and the kernels around the rows', () => {
    const failures: string[] = [];
    // planGemm picks tileM at T = 16, 32, 64 and vector loads by K's bytes; every other kernel has one workgroup size a device.
    const tokens = [1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 128, 1 << 20];
    const depths = [1, 2, 3, 4, 7, 8, 16, 4096];
    for (const caps of DEVICES) {
      const check = (plan: KernelPlan, code: string) => {
        const problems = launchProblems(caps, plan, declared(code));
        if (problems.length > 0 && failures.length < 20) failures.push(`${caps.name}: ${JSON.stringify(plan)}: ${problems.join('; ')}`);
      };
      for (const dtype of dtypes) {
        for (const T of tokens) {
          for (const K of depths) {
            for (const partial of [false, true]) {
              const gemm = planGemm(caps, dtype, { T, K }, partial);
              check(gemm, projectionGemmShader(gemm).code);
            }
          }
        }
        const reduce = planGemmReduce(caps, dtype);
        check(reduce, gemmReduceShader(reduce).code);
      }
      for (const positionType of ['i32', 'i64'] as const) {
        const table = planRopeTable(caps, positionType);
        check(table, ropeTableShader(table).code);
      }
      for (const plan of [planSlotOwners(caps, 'claim', 'last', 'i32'), planStridedCopy(caps, 1)]) {
        expect(launchProblems(caps, plan, undefined)).toEqual([]);
      }
    }
    expect(failures).toEqual([]);
  });
});
