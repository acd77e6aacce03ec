/**
 * Device faults on CUDA: out of memory, a Vulkan device made in the same
 * process after CUDA held most of the memory, and an illegal address from a
 * deliberately broken launch. Each becomes a coded error on the call that
 * meets it, never a hang. The illegal address leaves the process's CUDA
 * context unusable, so these checks run in a process of their own
 * (conformance.mjs cuda-faults), and that one last. Written against
 * describe/it/beforeAll/afterAll only, like cudaChecks.ts, for the device bundle.
 */
import type { Backend, Tensor } from '@kvkit/contracts';
import { isContractError } from '@kvkit/contracts';
import { describe, it } from 'vitest';
import type { CudaTensor } from '../src/runtime/cudaTensor.js';
import { cudaKernelsOf } from '../src/runtime/registry.js';
import { untyped, values } from './checkSupport.js';

function check(ok: boolean, message: string): void {
  if (!ok) throw new Error(message);
}

/** `p`, or an error once `ms` pass: a fault must surface, not hang. */
function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} neither settled nor failed within ${ms} ms`)), ms);
  });
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** What `run` threw (awaited), checked to be a ContractError; an error when it threw nothing. */
async function thrown(what: string, run: () => unknown): Promise<Error & { code: string; op: string; details: Record<string, unknown> }> {
  try {
    await within(30_000, what, Promise.resolve().then(run));
  } catch (e) {
    check(isContractError(e), `${what} threw a ${(e as Error)?.name}, not a ContractError: ${(e as Error)?.message}`);
    return e as Error & { code: string; op: string; details: Record<string, unknown> };
  }
  throw new Error(`${what} did not throw`);
}

/** 8 GiB tensors until the device refuses one: KV053 with CUDA_ERROR_OUT_OF_MEMORY. Returns how many it took. */
async function fillDevice(b: Backend): Promise<Tensor[]> {
  const held: Tensor[] = [];
  const e = await thrown('allocating past the device memory', () => {
    for (let i = 0; i < 64; i++) held.push(b.empty('f32', [2 ** 31 - 1]));
  });
  check(e.code === 'KV053' && e.op === 'empty', `past the device memory: ${e.code} from ${e.op}: ${e.message}`);
  check(e.details.error === 'CUDA_ERROR_OUT_OF_MEMORY', `the driver error named is ${String(e.details.error)}`);
  check(held.length > 0 && held.length < 64, `${held.length} tensors of 8 GiB were allocated before the refusal`);
  return held;
}

/** A small ropePoolFused call whose pool rows afterwards are known: the slots written hold the tokens' v rows. */
function poolWrite(b: Backend, seed: number) {
  const [N, H, D, S] = [5, 2, 32, 7];
  const v = values(N * H * D, seed + 2);
  const slots = [3, 0, 6, 1, 4];
  const args = {
    q: b.tensor('f32', [N, H, D], values(N * H * D, seed)),
    k: b.tensor('f32', [N, H, D], values(N * H * D, seed + 1)),
    v: b.tensor('f32', [N, H, D], v),
    positions: b.tensor('i32', [N], Int32Array.from({ length: N }, (_, n) => 2 * n + 1)),
    slots: b.tensor('i32', [N], Int32Array.from(slots)),
    kPool: b.tensor('f32', [S, H, D], values(S * H * D, seed + 4)),
    vPool: b.tensor('f32', [S, H, D], values(S * H * D, seed + 3)),
    numQoHeads: H,
    numKvHeads: H,
    headDim: D,
    ropeBase: 10000,
  };
  const run = () => untyped(b).ropePoolFused(args);
  /** Runs the op and checks the v pool. */
  const holds = async () => {
    const out = run();
    await b.sync();
    const after = (await b.read(args.vPool)) as Float32Array;
    const row = H * D;
    for (const [n, slot] of slots.entries()) {
      const got = after.subarray(slot * row, (slot + 1) * row);
      check(got.every((x, i) => Object.is(x, v[n * row + i])), `vPool slot ${slot} does not hold token ${n}'s v row`);
    }
    out.qRot.dispose();
    out.kRot.dispose();
  };
  return { run, holds };
}

export interface CudaFaultOptions {
  /** A WebGPU backend (Vulkan on this GPU), for the check that CUDA leaves it memory; absent where kernels-wgsl is not at hand. */
  readonly createWebGpuBackend?: () => Promise<Backend>;
}

export function defineCudaFaultChecks(create: () => Promise<Backend>, options: CudaFaultOptions = {}): void {
  describe('cuda: faults become coded errors', () => {
    it('allocating past the device memory throws KV053 (CUDA_ERROR_OUT_OF_MEMORY), and the backend then still runs an op', async () => {
      const b = await create();
      try {
        const held = await fillDevice(b);
        for (const t of held) t.dispose();
        await poolWrite(b, 11).holds();
        const data = values(1001, 5);
        check((await b.read(b.tensor('f32', [1001], data))).every((x, i) => Object.is(x, data[i])), 'a tensor read back differs from its data');
      } finally {
        b.dispose();
      }
    }, 120_000);

    const vulkan = options.createWebGpuBackend;
    const afterCuda = 'a WebGPU (Vulkan) device is made in the same process after a CUDA backend filled the device memory and was disposed';
    if (!vulkan) {
      it.skip(`${afterCuda} (skipped: no WebGPU backend here; the device bundle's cuda-faults suite runs it)`, () => {});
    } else {
      it(afterCuda, async () => {
        // A second backend holds the primary context meanwhile, as any other CUDA user in the process would.
        const holder = await create();
        try {
          const heavy = await create();
          try {
            const held = await fillDevice(heavy);
            for (const t of held) t.dispose();
            await heavy.sync();
          } finally {
            heavy.dispose();
          }
          const gpu = await within(60_000, 'createWebGpuBackend', vulkan());
          try {
            const data = values(4099, 9);
            const back = (await within(30_000, 'a WebGPU read', gpu.read(gpu.tensor('f32', [4099], data)))) as Float32Array;
            check(back.every((x, i) => Object.is(x, data[i])), 'the WebGPU tensor read back differs from its data');
            await poolWrite(gpu, 21).holds();
          } finally {
            gpu.dispose();
          }
          await poolWrite(holder, 31).holds();
        } finally {
          holder.dispose();
        }
      }, 180_000);
    }

    it('a kernel writing through an invalid pointer: the next sync throws KV053 (CUDA_ERROR_ILLEGAL_ADDRESS), later calls KV053 saying the context is unusable', async () => {
      const b = await create();
      const k = cudaKernelsOf(b, 'the illegal-address check');
      const src = b.tensor('f32', [4096], values(4096, 3));
      const op = poolWrite(b, 41);
      await b.sync();
      // The package's copy kernel, its destination an address nothing is mapped at.
      k.params.copy.write({ src: (src as unknown as CudaTensor).ptr, dst: 256, vectors: 1024 });
      k.cx.launch('copy_vectors', k.params.copy, 4, 1, 256, 0, 'the illegal-address check');
      const fault = await thrown('sync after the faulting kernel', () => b.sync());
      check(fault.code === 'KV053' && fault.op === 'sync', `sync: ${fault.code} from ${fault.op}: ${fault.message}`);
      check(fault.details.error === 'CUDA_ERROR_ILLEGAL_ADDRESS', `the driver error named is ${String(fault.details.error)}`);
      check(fault.message.includes('unusable'), `the message does not say the context is unusable: ${fault.message}`);
      for (const [what, run] of [
        ['tensor', () => b.tensor('f32', [4], [1, 2, 3, 4])],
        ['read', () => b.read(src)],
        ['ropePoolFused', op.run],
        ['sync', () => b.sync()],
      ] as const) {
        const later = await thrown(`${what} after the fault`, run);
        check(later.code === 'KV053' && later.op === what, `${what} after the fault: ${later.code} from ${later.op}: ${later.message}`);
        check(later.message.includes('unusable'), `${what} after the fault does not say the context is unusable: ${later.message}`);
      }
      // The fault was reported where it happened; dispose frees what it can and does not throw it again.
      b.dispose();
    }, 120_000);
  });
}
