import { Rng } from '@kvkit/conformance';
import { wgslKernels } from '@kvkit/contracts/kernels';
import type { WgslKernelDecl } from '@kvkit/contracts/kernels';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu } from '../src/index.js';
import * as generated from '../src/generated/params.js';
import type { NormRopeParams, NormRopeRanges } from '../src/generated/params.js';
import { kernelsOf } from '../src/runtime/createBackend.js';
import type { BufferRange, CompiledKernel, GpuRuntime } from '../src/runtime/gpuRuntime.js';
import type { KernelPlan } from '../src/shaders/plan.js';
import type { KernelInterface } from '../src/shaders/source.js';

const interfaces = Object.values(generated).filter((v): v is KernelInterface<any, any, any> => typeof v === 'object' && v !== null && 'uniformsWgsl' in v);
const byKernel = new Map(interfaces.map((i) => [i.kernel, i]));

/** Random values of each declared uniform's type, as the shader will see them. */
function uniformValues(decl: WgslKernelDecl, rng: Rng): Record<string, number> {
  return Object.fromEntries(
    Object.entries(decl.uniforms).map(([name, f]) => {
      const u = Math.floor(rng.next() * 2 ** 32);
      return [name, f.type === 'u32' ? u : f.type === 'i32' ? u | 0 : Math.fround((rng.next() - 0.5) * 2 ** (rng.int(40) - 20))];
    }),
  );
}

describe('generated kernel interfaces', () => {
  it('every declared WGSL kernel has its generated interface, with the declared uniforms in order', () => {
    expect([...byKernel.keys()].sort()).toEqual(wgslKernels.map((k) => k.kernel).sort());
    for (const decl of wgslKernels) expect(byKernel.get(decl.kernel)!.uniformFields, decl.kernel).toEqual(Object.keys(decl.uniforms));
  });

  it('numbers the bindings of a variant from 1 in declared order, leaving out those whose flag is off', () => {
    const on = generated.NORM_ROPE.bindings({ separateEps: true, scatter: true, KvRow: 'vec4<u32>', KvDst: 'atomic<u32>' });
    const off = generated.NORM_ROPE.bindings({ separateEps: false, scatter: false, KvRow: 'u32', KvDst: 'u32' });
    expect(on.specs.map((b) => b.name)).toEqual(['kv', 'weights', 'eps', 'cosSin', 'positions', 'slots', 'kDst', 'vDst', 'flags']);
    expect(off.specs.map((b) => b.name)).toEqual(['kv', 'weights', 'cosSin', 'positions', 'kDst', 'vDst', 'flags']);
    expect(on.wgsl).toContain('@group(0) @binding(1) var<storage, read> kv: array<vec4<u32>>;');
    expect(on.wgsl).toContain('@group(0) @binding(8) var<storage, read_write> vDst: array<atomic<u32>>;');
    expect(off.wgsl).toContain('@group(0) @binding(3) var<storage, read> cosSin: array<u32>;');
  });
});

const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: uniform layout tests skipped, no WebGPU adapter here: ${probe.reason}`);

describe.skipIf(!probe.ok)(`uniform blocks on the device${probe.ok ? '' : ' (skipped: no WebGPU adapter)'}`, () => {
  let backend: Awaited<ReturnType<typeof createWebGpuBackend>>;
  let runtime: GpuRuntime;
  beforeAll(async () => {
    backend = await createWebGpuBackend();
    runtime = kernelsOf.get(backend)!.runtime;
  });
  afterAll(() => backend?.dispose());

  it('a dispatch writes every field where the generated Params struct puts it: the shader reads back what the host set', async () => {
    const rng = new Rng(5);
    for (const decl of wgslKernels) {
      const iface = byKernel.get(decl.kernel)!;
      const names = Object.keys(decl.uniforms);
      // A probe kernel on the kernel's own uniform block: word i of `out` = field i, as the shader reads it.
      const code = `${iface.uniformsWgsl}
@group(0) @binding(1) var<storage, read_write> out: array<u32>;
@compute @workgroup_size(1)
fn main() {
  ${names.map((n, i) => `out[${i}] = bitcast<u32>(params.${n});`).join('\n  ')}
}`;
      const plan = { kernel: 'copy', uniformProbe: decl.kernel } as unknown as KernelPlan; // a cache key of its own
      const kernel = runtime.kernel(plan, () => ({ code, bindings: [{ name: 'out', access: 'read_write' as const }], writeUniforms: iface.writeUniforms }));
      const { buffer, id } = runtime.createBuffer(names.length * 4, 'uniform probe');
      const out: BufferRange = { buffer, id, offset: 0, size: names.length * 4 };
      // Two dispatches in one batch: each must read its own block.
      const first = uniformValues(decl, rng);
      const second = uniformValues(decl, rng);
      runtime.dispatch(kernel, { out }, first, 1);
      runtime.dispatch(kernel, { out }, second, 1);
      const words = new Uint32Array(await runtime.readBytes('test', buffer, 0, names.length * 4));
      const seen = Object.fromEntries(
        names.map((n, i) => {
          const type = decl.uniforms[n]!.type;
          return [n, type === 'u32' ? words[i]! : type === 'i32' ? words[i]! | 0 : new Float32Array(words.buffer, i * 4, 1)[0]!];
        }),
      );
      expect(seen, decl.kernel).toEqual(second);
      buffer.destroy();
    }
  });
});

/** Compile-time checks (tsc runs them in typecheck): a dispatch takes exactly the declared uniforms and the declared bindings. */
export function rejectedByTsc(runtime: GpuRuntime, kernel: CompiledKernel<NormRopeParams, NormRopeRanges>, ranges: NormRopeRanges, params: NormRopeParams, range: BufferRange): void {
  // @ts-expect-error a misspelt uniform
  runtime.dispatch(kernel, ranges, { ...params, destLayerStrides: 1 }, 1);
  const { callFlag: _, ...missing } = params;
  // @ts-expect-error a missing uniform
  runtime.dispatch(kernel, ranges, missing, 1);
  const extra = { ...params, headDim: 1 };
  // @ts-expect-error an undeclared uniform, even in a variable (no excess-property check there)
  runtime.dispatch(kernel, ranges, extra, 1);
  const { kDst: __, ...unbound } = ranges;
  // @ts-expect-error a required binding left out
  runtime.dispatch(kernel, unbound, params, 1);
  // @ts-expect-error a binding the kernel does not declare
  runtime.dispatch(kernel, { ...ranges, kOut: range }, params, 1);
}
