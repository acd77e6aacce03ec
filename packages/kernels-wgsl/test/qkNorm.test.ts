import { checkMropeQkNormOnViews, mropeQkNormCases, randomPositive, randomValues, Rng, runMropeQkNormCase, seedOf } from '@kvkit/conformance';
import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createWebGpuBackend, probeWebGpu, webGpuBackendStats } from '../src/index.js';
import { onDefaultLimits } from './defaultLimits.js';

/**
 * The Q/K-norm kernel's other shapes: its three-dispatch form on a device
 * with WebGPU's default eight storage bindings, and its workgroup-memory
 * reduction where subgroups are off, and its reading of q, k and v views in
 * place. The conformance suite runs every case on the default backend.
 */
const probe = await probeWebGpu();
if (!probe.ok) console.warn(`kernels-wgsl: Q/K-norm tests skipped, no WebGPU adapter here: ${probe.reason}`);
const withDevice = describe.skipIf(!probe.ok);
const skipNote = probe.ok ? '' : ' (skipped: no WebGPU adapter)';
const TIMEOUT_MS = 120_000;

const normed = mropeQkNormCases.filter((c) => (c.qNorm || c.kNorm) && c.N > 0);

let cpu: Backend;
beforeAll(() => {
  cpu = createCpuBackend();
});
afterAll(() => cpu?.dispose());

withDevice(`ropePoolFused with a Q/K-norm, other kernel shapes${skipNote}`, () => {
  it(
    'on a device with the default 8 storage bindings: q, k and v rows in three dispatches, the same answers, views too',
    async () => {
      await onDefaultLimits(async (small) => {
        for (const c of normed) {
          const before = webGpuBackendStats(small).dispatches;
          await runMropeQkNormCase(small, cpu, c, 'bf16');
          // cos/sin table, the check of the slots, the slot ownership pass (one workgroup: a call of few tokens), then q, k and v rows.
          expect(webGpuBackendStats(small).dispatches - before, c.name).toBe(6);
        }
        // Each of the three dispatches finds its rows through the views' strides.
        await checkMropeQkNormOnViews(small, 'bf16');
      });
    },
    TIMEOUT_MS,
  );

  it(
    'with subgroups off, the sums of squares meet in workgroup memory',
    async () => {
      const workgroupOnly = await createWebGpuBackend({ useSubgroups: false });
      try {
        for (const c of normed) for (const dtype of ['f32', 'f16'] as const) await runMropeQkNormCase(workgroupOnly, cpu, c, dtype);
      } finally {
        workgroupOnly.dispose();
      }
    },
    TIMEOUT_MS,
  );

  it(
    'reads q, k and v views of a fused projection in place, a transposed k through one strided copy',
    async () => {
      const backend = await createWebGpuBackend();
      try {
        const rng = new Rng(seedOf('Q/K-norm views in place'));
        const [N, Hq, H, D, S] = [5, 4, 2, 64, 7];
        const row = (Hq + 2 * H) * D + 16;
        const fused = backend.tensor('bf16', [16 + N * row], randomValues(rng, 16 + N * row));
        const { q, k, v } = backend.splitQkv(backend.view(fused, [N, row - 16], { strides: [row, 1], offset: 16 }), { numQoHeads: Hq, numKvHeads: H, headDim: D });
        const pools = [0, 1].map(() => backend.tensor('bf16', [S, H, D], randomValues(rng, S * H * D)));
        const rest = {
          positions: backend.tensor('i64', [3, N], BigInt64Array.from({ length: 3 * N }, () => BigInt(rng.int(100)))),
          mropeSection: [8, 12, 12] as const,
          slots: backend.tensor('i32', [N], [4, 0, -1, 6, 2]),
          qNormWeight: backend.tensor('bf16', [D], randomPositive(rng, D)),
          kNormWeight: backend.tensor('f32', [D], randomPositive(rng, D)),
          eps: 1e-6,
          numQoHeads: Hq,
          numKvHeads: H,
          headDim: D,
          ropeBase: 10000,
        };
        const before = webGpuBackendStats(backend).gathers;
        backend.ropePoolFused({ ...rest, q, k, v, kPool: pools[0]!, vPool: pools[1]! });
        expect(webGpuBackendStats(backend).gathers, 'row-strided views need no copy').toBe(before);
        const kT = backend.view(backend.tensor('bf16', [N * H * D], randomValues(rng, N * H * D)), [N, H, D], { strides: [H * D, 1, H] });
        backend.ropePoolFused({ ...rest, q, k: kT, v, kPool: pools[0]!, vPool: pools[1]! });
        expect(webGpuBackendStats(backend).gathers, 'an inner stride of H is copied once').toBe(before + 1);
        await backend.sync();
      } finally {
        backend.dispose();
      }
    },
    TIMEOUT_MS,
  );
});
