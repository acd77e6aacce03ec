import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { brokenCalls, checkBrokenCall } from './brokenCalls.js';
import { fusedConfigs, materializerConfigs, ropePoolConfigs } from './configs.js';
import { checkInterleaving, interleavings } from './interleaving.js';
import { checkProperty, runScale, suiteSeed } from './replay.js';
import type { PropertyRun } from './replay.js';
import { checkFusedCall, checkMaterializerCalls, checkRopePoolCall } from './validCalls.js';

export interface PropertyOptions {
  /** Runs per property before KVKIT_PROPERTY_SCALE; a slow emulated device takes fewer. */
  readonly runs?: { readonly valid?: number; readonly broken?: number; readonly interleaved?: number };
}

/** Shrinking a failure on an emulated device runs many calls: headroom past the runs themselves. */
const TIMEOUT_MS = 300_000;

/**
 * Registers the property suite for one backend: random valid calls of every
 * op against the CPU reference, random broken calls answered by a coded
 * ContractError with nothing written, and interleaved materializers. The
 * suite seed is printed once; KVKIT_PROPERTY_SEED replays it, and
 * KVKIT_PROPERTY_SCALE multiplies the runs.
 */
export function definePropertySuite(name: string, create: () => Backend | Promise<Backend>, options: PropertyOptions = {}): void {
  const seed = suiteSeed();
  const scale = runScale();
  const runs = (n: number): PropertyRun => ({ seed, runs: n * scale });
  const valid = runs(options.runs?.valid ?? 40);
  const broken = runs(options.runs?.broken ?? 300);
  const interleaved = runs(options.runs?.interleaved ?? 15);
  describe(`${name}: properties`, () => {
    let backend: Backend | undefined;
    let twin: Backend | undefined;
    let reference: Backend | undefined;
    const all = () => {
      if (!backend || !twin || !reference) throw new Error(`the ${name} backend was not created (see the beforeAll error)`);
      return { backend, twin, reference };
    };
    beforeAll(async () => {
      console.log(`${name}: property seed ${seed} (replay with KVKIT_PROPERTY_SEED=${seed}; runs ×${scale}, KVKIT_PROPERTY_SCALE)`);
      backend = await create();
      twin = await create();
      reference = createCpuBackend();
    }, TIMEOUT_MS);
    afterAll(() => {
      backend?.dispose();
      twin?.dispose();
      reference?.dispose();
    });

    it(`fusedNormRopeStacked: random valid calls equal the CPU reference (${valid.runs} runs)`, () => {
      const b = all();
      return checkProperty('fusedNormRopeStacked valid', valid, fusedConfigs, (c) => checkFusedCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`ropePoolFused: random valid calls, slots skipped, unnamed and repeated, equal the CPU reference (${valid.runs} runs)`, () => {
      const b = all();
      return checkProperty('ropePoolFused valid', valid, ropePoolConfigs, (c) => checkRopePoolCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`KvMaterializer: random materialize and materializeInto sequences equal the CPU reference (${valid.runs} runs)`, () => {
      const b = all();
      return checkProperty('KvMaterializer valid', valid, materializerConfigs, (c) => checkMaterializerCalls(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`one thing broken in a valid call: a catalog-coded ContractError, nothing written (${broken.runs} runs)`, () => {
      const b = all();
      return checkProperty('broken calls', broken, brokenCalls, (call) => checkBrokenCall({ backend: b.backend, twin: b.twin, cpu: b.reference }, call));
    }, TIMEOUT_MS);
    it(`two materializers and a fused call interleaved give the bytes of each run alone (${interleaved.runs} runs)`, () => {
      const b = all();
      return checkProperty('interleaving', interleaved, interleavings, (x) => checkInterleaving(b.backend, x));
    }, TIMEOUT_MS);
  });
}
