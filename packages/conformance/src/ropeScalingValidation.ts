import type { Fixture } from './fixture.js';
import { untyped } from './tensors.js';
import type { ValidationCase } from './validation-cases.js';

/** The checks of `ropeScaling` (KV060–KV064), on ropePoolFused and the materializer: each a coded error before anything runs. */

const rope = (fx: Fixture, ropeScaling: unknown) => untyped(fx.backend).ropePoolFused(fx.ropeArgs({ ropeScaling }));
/** A materializer from ropeBase (the fixture's default has a cache) with this scaling. */
const create = (fx: Fixture, ropeScaling: unknown) => untyped(fx.backend).createKvMaterializer(fx.createArgs({ cosSinCache: undefined, ropeBase: 10000, ropeScaling }));
const llama3 = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 };

export const ropeScalingValidationCases: readonly ValidationCase[] = [
  { code: 'KV060', op: 'ropePoolFused', name: 'ropeScaling.type is longrope', arg: 'ropeScaling.type', mentions: ['"longrope"', 'linear | dynamic | llama3 | yarn'], call: (fx) => rope(fx, { type: 'longrope', factor: 4 }) },
  { code: 'KV060', op: 'createKvMaterializer', name: 'ropeScaling is a JSON string', arg: 'ropeScaling', call: (fx) => create(fx, '{"type":"linear","factor":2}') },
  { code: 'KV061', op: 'ropePoolFused', name: 'ropeScaling has the Hugging Face key low_freq_factor', arg: 'ropeScaling.low_freq_factor', mentions: ['lowFreqFactor'], call: (fx) => rope(fx, { ...llama3, low_freq_factor: 1 }) },
  { code: 'KV061', op: 'createKvMaterializer', name: 'yarn without originalMaxPositions', arg: 'ropeScaling.originalMaxPositions', call: (fx) => create(fx, { type: 'yarn', factor: 4 }) },
  { code: 'KV062', op: 'ropePoolFused', name: 'originalMaxPositions is a string', arg: 'ropeScaling.originalMaxPositions', mentions: ['"8192"'], call: (fx) => rope(fx, { ...llama3, originalMaxPositions: '8192' }) },
  { code: 'KV062', op: 'ropePoolFused', name: 'yarn attentionFactor is 0', arg: 'ropeScaling.attentionFactor', call: (fx) => rope(fx, { type: 'yarn', factor: 4, originalMaxPositions: 4096, attentionFactor: 0 }) },
  { code: 'KV063', op: 'ropePoolFused', name: 'llama3 lowFreqFactor above highFreqFactor', arg: 'ropeScaling', mentions: ['lowFreqFactor = 5 must be below highFreqFactor = 4'], call: (fx) => rope(fx, { ...llama3, lowFreqFactor: 5 }) },
  { code: 'KV063', op: 'createKvMaterializer', name: 'ropeScaling next to a cosSinCache', arg: 'ropeScaling', call: (fx) => untyped(fx.backend).createKvMaterializer(fx.createArgs({ ropeScaling: { type: 'linear', factor: 2 } })) },
  { code: 'KV064', op: 'ropePoolFused', name: 'linear factor 0.5', arg: 'ropeScaling.factor', mentions: ['0.5'], call: (fx) => rope(fx, { type: 'linear', factor: 0.5 }) },
  { code: 'KV064', op: 'createKvMaterializer', name: 'dynamic factor 0', arg: 'ropeScaling.factor', call: (fx) => create(fx, { type: 'dynamic', factor: 0, originalMaxPositions: 4096 }) },
];
