import type { Backend, FloatDType } from '@kvkit/contracts';
import { createCpuBackend } from '@kvkit/kernels-cpu';
import { afterAll, beforeAll, describe, it } from 'vitest';
import { fusedNormRopeStackedCases, kvMaterializerCases, ropePoolFusedCases } from './cases.js';
import {
  checkAllSlotsSkipped,
  checkIdentityProjection,
  checkMaterializerAgreements,
  checkPositionZeroIsNormOnly,
  checkRopePoolPositionZero,
  checkRotationKeepsPairNorms,
  checkTensorRoundTrip,
  checkUnitWeightRms,
  checkZeroTokens,
} from './invariants.js';
import { runFusedCase, runMaterializerCase, runRopePoolCase } from './run-cases.js';
import { checkBitsRoundTrip, checkOpsOnBits } from './bits.js';
import { describeFp8Pools } from './fp8Pools.js';
import { describePagedReads } from './pagedAttention.js';
import { describeMlaPoolFused } from './mlaPoolFused.js';
import { checkAsyncWriteLayerKvRefused } from './synchronousCallback.js';
import { defineMropeMaterializerCases } from './mropeMaterializer.js';
import { defineMropeQkNormCases } from './mropeQkNorm.js';
import { defineViewCases } from './views.js';
import { CONTESTED_SHAPES, CONTESTED_TOKENS, checkContestedSlotsMaterializeInto, checkContestedSlotsRopePool } from './contestedSlots.js';
import { defineRopeVariantChecks } from './ropeVariants.js';

export interface ConformanceOptions {
  /** Storage dtypes to run every case in; all three by default. */
  readonly dtypes?: readonly FloatDType[];
}

/** Sizes here are small, but a slow emulated device (SwiftShader) needs headroom per case. */
const CASE_TIMEOUT_MS = 60_000;

/**
 * Registers the numerical conformance suite for one backend: every case of
 * cases.ts in every dtype, compared with the CPU reference and with the f64
 * formulas, then the reference-free invariants and the T = 0 behaviours.
 * Only the public Backend API is used, so the WebGPU and CUDA backends run
 * the very same tests.
 */
export function defineConformanceSuite(name: string, create: () => Backend | Promise<Backend>, options: ConformanceOptions = {}): void {
  const dtypes = options.dtypes ?? (['f32', 'f16', 'bf16'] as const);
  describe(`${name}: conformance`, () => {
    let backend: Backend | undefined;
    let reference: Backend | undefined;
    const both = (): [Backend, Backend] => {
      if (!backend || !reference) throw new Error(`the ${name} backend was not created (see the beforeAll error)`);
      return [backend, reference];
    };
    beforeAll(async () => {
      backend = await create();
      reference = createCpuBackend();
    }, CASE_TIMEOUT_MS);
    afterAll(() => {
      backend?.dispose();
      reference?.dispose();
    });

    describe('tensor() and read()', () => {
      for (const dtype of dtypes) it(`round trip [${dtype}]`, () => checkTensorRoundTrip(both()[0], dtype), CASE_TIMEOUT_MS);
    });

    describe('tensorFromBits() and readBits()', () => {
      for (const dtype of dtypes) {
        it(`every code read back bit for bit [${dtype}]`, () => checkBitsRoundTrip(both()[0], dtype), CASE_TIMEOUT_MS);
        it(`ops on tensors from bits = ops on tensors from values [${dtype}]`, () => checkOpsOnBits(both()[0], dtype), CASE_TIMEOUT_MS);
      }
    });

    defineViewCases(() => both()[0], dtypes, CASE_TIMEOUT_MS);

    it('an async writeLayerKv is refused with KV044, leaving no unhandled rejection', () => checkAsyncWriteLayerKvRefused(...both()), CASE_TIMEOUT_MS);

    describe('fusedNormRopeStacked', () => {
      for (const c of fusedNormRopeStackedCases) {
        for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runFusedCase(...both(), c, dtype), CASE_TIMEOUT_MS);
      }
    });

    describe('ropePoolFused', () => {
      for (const c of ropePoolFusedCases) {
        for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runRopePoolCase(...both(), c, dtype), CASE_TIMEOUT_MS);
      }
    });

    defineMropeQkNormCases(both, dtypes, CASE_TIMEOUT_MS);
    defineMropeMaterializerCases(both, dtypes, CASE_TIMEOUT_MS);

    describe('KvMaterializer', () => {
      for (const c of kvMaterializerCases) {
        for (const dtype of dtypes) it(`${c.name} [${dtype}]`, () => runMaterializerCase(...both(), c, dtype), CASE_TIMEOUT_MS);
      }
    });

    describe('ropeScaling and exact angles, against the f64 reference', () => defineRopeVariantChecks(() => both()[0], CASE_TIMEOUT_MS));
    describeFp8Pools(both, CASE_TIMEOUT_MS);
    describeMlaPoolFused(() => both()[0], dtypes, CASE_TIMEOUT_MS);
    describePagedReads(() => both()[0], dtypes, CASE_TIMEOUT_MS);

    describe('contested slots: the last token of each slot writes it, whole', () => {
      for (const dtype of dtypes) {
        for (const shape of CONTESTED_SHAPES) {
          const at = `H=${shape.H} D=${shape.D}, slots ${shape.slotDType}`;
          for (const tokens of CONTESTED_TOKENS) it(`ropePoolFused, ${at}, ${tokens} tokens [${dtype}]`, () => checkContestedSlotsRopePool(both()[0], dtype, shape, tokens), CASE_TIMEOUT_MS);
          it(`materializeInto, ${at} [${dtype}]`, () => checkContestedSlotsMaterializeInto(both()[0], dtype, shape), CASE_TIMEOUT_MS);
        }
      }
    });

    describe('invariants (no reference)', () => {
      for (const dtype of dtypes) {
        for (const style of ['neox', 'gptj'] as const) {
          it(`rotation keeps each pair's length; the tail past rotaryDim is only normed (${style}) [${dtype}]`, () => checkRotationKeepsPairNorms(both()[0], dtype, style), CASE_TIMEOUT_MS);
          it(`position 0 leaves K equal to the normed K (${style}) [${dtype}]`, () => checkPositionZeroIsNormOnly(both()[0], dtype, style), CASE_TIMEOUT_MS);
        }
        it(`unit weight: RMS of each K head is sqrt(m / (m + eps)) [${dtype}]`, () => checkUnitWeightRms(both()[0], dtype), CASE_TIMEOUT_MS);
        it(`ropePoolFused at position 0 returns q and k unchanged [${dtype}]`, () => checkRopePoolPositionZero(both()[0], dtype), CASE_TIMEOUT_MS);
        for (const slotDType of ['i32', 'i64'] as const) {
          it(`negative slots (${slotDType}) leave both pools untouched [${dtype}]`, () => checkAllSlotsSkipped(both()[0], dtype, slotDType), CASE_TIMEOUT_MS);
        }
        it(`materialize with an identity kvWeight equals fusedNormRopeStacked [${dtype}]`, () => checkIdentityProjection(both()[0], dtype), CASE_TIMEOUT_MS);
        it(`materializer: ropeBase = built cache, eps number = tensor, positions shapes agree, materializeInto = materialize [${dtype}]`, () => checkMaterializerAgreements(both()[0], dtype), CASE_TIMEOUT_MS);
        it(`T = 0: empty outputs, no callback, no pool row touched [${dtype}]`, () => checkZeroTokens(both()[0], dtype), CASE_TIMEOUT_MS);
      }
    });
  });
}
