import type { Backend } from '@kvkit/contracts';
import fc from 'fast-check';
import { collectLayers } from '../run-cases.js';
import { Checks } from '../tolerances.js';
import { readFloats, Scope, untyped } from '../tensors.js';
import type { UntypedMaterializer } from '../tensors.js';
import { buildArgs, fusedSpec, makeTensor, materializerCallSpec } from './callSpecs.js';
import type { TensorSpec } from './callSpecs.js';
import { fusedConfigs, materializerConfigs } from './configs.js';
import type { FusedConfig, MaterializerConfig } from './configs.js';
import { materializerFor } from './validCalls.js';

/**
 * Two materializers alive at once on one backend, their calls interleaved
 * with a fusedNormRopeStacked call and nothing awaited in between, give the
 * same bytes as each sequence run alone: no workspace, cache or queue state
 * leaks from one to another.
 */

export interface Interleaving {
  readonly first: MaterializerConfig;
  readonly second: MaterializerConfig;
  readonly fused: FusedConfig;
  /** Which sequence the next step comes from (0, 1: the materializers; 2: the fused call), where it has steps left. */
  readonly picks: readonly number[];
}

export const interleavings: fc.Arbitrary<Interleaving> = fc.record({
  first: materializerConfigs,
  second: materializerConfigs,
  fused: fusedConfigs,
  picks: fc.array(fc.integer({ min: 0, max: 2 }), { minLength: 7, maxLength: 7 }),
});

/** One call, enqueued when run; it returns the reads of what it wrote. */
type Step = () => Promise<Float32Array>[];

function materializerSteps(s: Scope, m: UntypedMaterializer, c: MaterializerConfig): Step[] {
  return c.calls.map((call, i) => () => {
    const spec = materializerCallSpec(c, i);
    const t = (name: string) => makeTensor(s, spec.args[name] as TensorSpec);
    if (call.entry === 'materialize') return collectLayers(s.backend, m, t('ctxHidden'), t('positions')).flatMap((x) => [x.kData, x.vData]);
    const [kPool, vPool] = [t('kPool'), t('vPool')];
    m.materializeInto({ ctxHidden: t('ctxHidden'), positions: t('positions'), kPool, vPool, slots: t('slots') });
    return [readFloats(s.backend, kPool), readFloats(s.backend, vPool)];
  });
}

function fusedStep(s: Scope, c: FusedConfig): Step {
  return () => {
    const out = untyped(s.backend).fusedNormRopeStacked(buildArgs(s, fusedSpec({ ...c, outputs: 'allocated' })));
    s.track(out.kOut);
    s.track(out.vOut);
    return [readFloats(s.backend, out.kOut), readFloats(s.backend, out.vOut)];
  };
}

async function settle(backend: Backend, reads: Promise<Float32Array>[][]): Promise<Float32Array[][]> {
  await backend.sync();
  return Promise.all(reads.map((r) => Promise.all(r)));
}

export async function checkInterleaving(backend: Backend, x: Interleaving): Promise<void> {
  const checks = new Checks('interleaved calls vs each sequence alone');
  const alone: Float32Array[][][] = [];
  const sequences = (s: Scope): Step[][] => [
    materializerSteps(s, materializerFor(s, x.first), x.first),
    materializerSteps(s, materializerFor(s, x.second), x.second),
    [fusedStep(s, x.fused)],
  ];
  for (let which = 0; which < 3; which++) {
    const s = new Scope(backend);
    try {
      alone.push(await settle(backend, sequences(s)[which]!.map((step) => step())));
    } finally {
      s.dispose();
    }
  }
  const s = new Scope(backend);
  try {
    const queues = sequences(s).map((steps) => [...steps]);
    const reads: Promise<Float32Array>[][][] = [[], [], []];
    const total = queues.reduce((n, q) => n + q.length, 0);
    for (let i = 0; i < total; i++) {
      let which = x.picks[i % x.picks.length]!;
      while (queues[which]!.length === 0) which = (which + 1) % 3;
      reads[which]!.push(queues[which]!.shift()!());
    }
    const together = await Promise.all(reads.map((r) => settle(backend, r)));
    const names = ['first materializer', 'second materializer', 'fusedNormRopeStacked'];
    for (const [which, steps] of together.entries()) {
      for (const [step, outputs] of steps.entries()) {
        for (const [k, data] of outputs.entries()) checks.exact(`${names[which]}, call ${step + 1}, output ${k + 1}, interleaved vs alone`, data, alone[which]![step]![k]!);
      }
    }
    checks.done();
  } finally {
    s.dispose();
  }
}
