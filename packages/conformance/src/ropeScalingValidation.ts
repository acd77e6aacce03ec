import type { Fixture } from './fixture.js';
import { untyped } from './tensors.js';
import type { ValidationCase } from './validation-cases.js';

/** The checks of `ropeScaling` (KV060–KV064, LongRoPE's KV084 and KV085), on ropePoolFused and the materializer: each a coded error before anything runs. */

const rope = (fx: Fixture, ropeScaling: unknown) => untyped(fx.backend).ropePoolFused(fx.ropeArgs({ ropeScaling }));
/** A materializer from ropeBase (the fixture's default has a cache) with this scaling. */
const create = (fx: Fixture, ropeScaling: unknown) => untyped(fx.backend).createKvMaterializer(fx.createArgs({ cosSinCache: undefined, ropeBase: 10000, ropeScaling }));
const llama3 = { type: 'llama3', factor: 8, lowFreqFactor: 1, highFreqFactor: 4, originalMaxPositions: 8192 };
/** LongRoPE for the fixture's R = 4: two factors a list. */
const longrope = { type: 'longrope', shortFactor: [1, 1.5], longFactor: [2, 8], originalMaxPositions: 4096, factor: 32 };

export const ropeScalingValidationCases: readonly ValidationCase[] = [
  { code: 'KV060', op: 'ropePoolFused', name: "ropeScaling.type is Phi-3's old name su", arg: 'ropeScaling.type', mentions: ['"su"', 'linear | dynamic | llama3 | yarn | longrope'], call: (fx) => rope(fx, { ...longrope, type: 'su' }) },
  { code: 'KV060', op: 'createKvMaterializer', name: 'ropeScaling is a JSON string', arg: 'ropeScaling', call: (fx) => create(fx, '{"type":"linear","factor":2}') },
  { code: 'KV061', op: 'ropePoolFused', name: 'ropeScaling has the Hugging Face key low_freq_factor', arg: 'ropeScaling.low_freq_factor', mentions: ['lowFreqFactor'], call: (fx) => rope(fx, { ...llama3, low_freq_factor: 1 }) },
  { code: 'KV061', op: 'createKvMaterializer', name: 'yarn without originalMaxPositions', arg: 'ropeScaling.originalMaxPositions', call: (fx) => create(fx, { type: 'yarn', factor: 4 }) },
  { code: 'KV062', op: 'ropePoolFused', name: 'originalMaxPositions is a string', arg: 'ropeScaling.originalMaxPositions', mentions: ['"8192"'], call: (fx) => rope(fx, { ...llama3, originalMaxPositions: '8192' }) },
  { code: 'KV062', op: 'ropePoolFused', name: 'yarn attentionFactor is 0', arg: 'ropeScaling.attentionFactor', call: (fx) => rope(fx, { type: 'yarn', factor: 4, originalMaxPositions: 4096, attentionFactor: 0 }) },
  { code: 'KV063', op: 'ropePoolFused', name: 'llama3 lowFreqFactor above highFreqFactor', arg: 'ropeScaling', mentions: ['lowFreqFactor = 5 must be below highFreqFactor = 4'], call: (fx) => rope(fx, { ...llama3, lowFreqFactor: 5 }) },
  { code: 'KV063', op: 'createKvMaterializer', name: 'ropeScaling next to a cosSinCache', arg: 'ropeScaling', call: (fx) => untyped(fx.backend).createKvMaterializer(fx.createArgs({ ropeScaling: { type: 'linear', factor: 2 } })) },
  { code: 'KV064', op: 'ropePoolFused', name: 'linear factor 0.5', arg: 'ropeScaling.factor', mentions: ['0.5'], call: (fx) => rope(fx, { type: 'linear', factor: 0.5 }) },
  { code: 'KV064', op: 'createKvMaterializer', name: 'dynamic factor 0', arg: 'ropeScaling.factor', call: (fx) => create(fx, { type: 'dynamic', factor: 0, originalMaxPositions: 4096 }) },
  { code: 'KV061', op: 'ropePoolFused', name: "longrope with the Hugging Face key short_factor", arg: 'ropeScaling.short_factor', mentions: ['shortFactor'], call: (fx) => rope(fx, { type: 'longrope', short_factor: [1, 1], longFactor: [2, 8], originalMaxPositions: 4096 }) },
  { code: 'KV062', op: 'createKvMaterializer', name: 'longrope sequenceLength 0', arg: 'ropeScaling.sequenceLength', call: (fx) => create(fx, { ...longrope, sequenceLength: 0 }) },
  { code: 'KV064', op: 'ropePoolFused', name: 'longrope factor 0.5', arg: 'ropeScaling.factor', call: (fx) => rope(fx, { ...longrope, factor: 0.5 }) },
  { code: 'KV084', op: 'ropePoolFused', name: 'longFactor of headDim / 2 entries where R/2 is 2', arg: 'ropeScaling.longFactor', mentions: ['R/2 = 2', '4 entries'], call: (fx) => rope(fx, { ...longrope, longFactor: [2, 8, 8, 8] }) },
  { code: 'KV084', op: 'createKvMaterializer', name: 'shortFactor as the JSON string of a list', arg: 'ropeScaling.shortFactor', call: (fx) => create(fx, { ...longrope, shortFactor: '[1, 1.5]' }) },
  { code: 'KV085', op: 'ropePoolFused', name: 'a shortFactor entry of 0', arg: 'ropeScaling.shortFactor', mentions: ['shortFactor[1] = 0'], call: (fx) => rope(fx, { ...longrope, shortFactor: [1, 0] }) },
  { code: 'KV085', op: 'createKvMaterializer', name: 'a longFactor entry of null', arg: 'ropeScaling.longFactor', mentions: ['longFactor[0] = null'], call: (fx) => create(fx, { ...longrope, longFactor: [null, 8] }) },
];
