import type { Backend } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { propertySeeds, runsPerSeed } from '../../../../propertySeeds.js';
import { skipUnlessRuns } from '../pagedAttention.js';
import { brokenCalls, checkBrokenCall, readSideBrokenCalls } from './brokenCalls.js';
import { attentionConfigs, copyConfigs, fusedConfigs, materializerConfigs, ropePoolConfigs } from './configs.js';
import { checkInterleaving, interleavings } from './interleaving.js';
import { checkProperty } from './replay.js';
import { checkAttentionCall, checkCopyCall, checkFusedCall, checkMaterializerCalls, checkRopePoolCall } from './validCalls.js';

export interface PropertyOptions {
  /**
   * Runs per property, shared out over the seeds, before KVKIT_PROPERTY_SCALE; a slow emulated device takes fewer.
   * `readSide` (default: `valid`) and `readSideBroken` (default 150) are pagedAttention's and copySlots'.
   */
  readonly runs?: { readonly valid?: number; readonly broken?: number; readonly interleaved?: number; readonly readSide?: number; readonly readSideBroken?: number };
}

/** Shrinking a failure on an emulated device runs many calls: headroom past the runs themselves. */
const TIMEOUT_MS = 300_000;

/**
 * Registers the property suite for one backend: random valid calls of every
 * op against the CPU reference, random broken calls answered by a coded
 * ContractError with nothing written, and interleaved materializers, each
 * once per seed of the run (propertySeeds.js: fixed ones unless
 * KVKIT_PROPERTY_SEED says otherwise, printed).
 */
export function definePropertySuite(name: string, create: () => Backend | Promise<Backend>, options: PropertyOptions = {}): void {
  const seeds = propertySeeds();
  const valid = options.runs?.valid ?? 40;
  const broken = options.runs?.broken ?? 300;
  const interleaved = options.runs?.interleaved ?? 15;
  const readSide = options.runs?.readSide ?? valid;
  const readSideBroken = options.runs?.readSideBroken ?? 150;
  const runs = (n: number) => `${runsPerSeed(n)} runs a seed`;
  describe(`${name}: properties (seeds ${seeds.join(', ')})`, () => {
    let backend: Backend | undefined;
    let twin: Backend | undefined;
    let reference: Backend | undefined;
    let referenceTwin: Backend | undefined;
    const all = () => {
      if (!backend || !twin || !reference || !referenceTwin) throw new Error(`the ${name} backend was not created (see the beforeAll error)`);
      return { backend, twin, reference, referenceTwin };
    };
    beforeAll(async () => {
      backend = await create();
      twin = await create();
      reference = createCpuBackend();
      referenceTwin = createCpuBackend();
    }, TIMEOUT_MS);
    afterAll(() => {
      backend?.dispose();
      twin?.dispose();
      reference?.dispose();
      referenceTwin?.dispose();
    });

    it(`fusedNormRopeStacked: random valid calls equal the CPU reference (${runs(valid)})`, () => {
      const b = all();
      return checkProperty('fusedNormRopeStacked valid', valid, fusedConfigs, (c) => checkFusedCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`ropePoolFused: random valid calls, slots skipped, unnamed and repeated, equal the CPU reference (${runs(valid)})`, () => {
      const b = all();
      return checkProperty('ropePoolFused valid', valid, ropePoolConfigs, (c) => checkRopePoolCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`KvMaterializer: random materialize and materializeInto sequences equal the CPU reference (${runs(valid)})`, () => {
      const b = all();
      return checkProperty('KvMaterializer valid', valid, materializerConfigs, (c) => checkMaterializerCalls(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`one thing broken in a valid call: a catalog-coded ContractError, nothing written (${runs(broken)})`, () => {
      const b = all();
      return checkProperty('broken calls', broken, brokenCalls, (call) => checkBrokenCall({ backend: b.backend, twin: b.twin, cpu: b.reference }, call));
    }, TIMEOUT_MS);
    it(`pagedAttention: random valid calls (GQA, either layout, fp8 pools, masks, caps, shared slots) equal the CPU reference and the f64 formulas (${runs(readSide)})`, (ctx) => {
      const b = all();
      skipUnlessRuns(ctx, b.backend, 'pagedAttention');
      return checkProperty('pagedAttention valid', readSide, attentionConfigs, (c) => checkAttentionCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`copySlots: random valid calls (any layouts and dtypes, in place, skipped and repeated slots) equal the CPU reference and the copy rule (${runs(readSide)})`, (ctx) => {
      const b = all();
      skipUnlessRuns(ctx, b.backend, 'copySlots');
      return checkProperty('copySlots valid', readSide, copyConfigs, (c) => checkCopyCall(b.backend, b.reference, c));
    }, TIMEOUT_MS);
    it(`pagedAttention and copySlots, one thing broken: the code the CPU reference throws, nothing written (${runs(readSideBroken)})`, (ctx) => {
      const b = all();
      const ops = (['pagedAttention', 'copySlots'] as const).filter((op) => b.backend.ops.includes(op));
      if (ops.length === 0) skipUnlessRuns(ctx, b.backend, 'pagedAttention');
      return checkProperty('read-side broken calls', readSideBroken, readSideBrokenCalls(ops), (call) =>
        checkBrokenCall({ backend: b.backend, twin: b.twin, cpu: b.reference, cpuTwin: b.referenceTwin }, call),
      );
    }, TIMEOUT_MS);
    it(`two materializers and a fused call interleaved give the bytes of each run alone (${runs(interleaved)})`, () => {
      const b = all();
      return checkProperty('interleaving', interleaved, interleavings, (x) => checkInterleaving(b.backend, x));
    }, TIMEOUT_MS);
  });
}
