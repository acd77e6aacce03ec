import { describe, expect, it } from 'vitest';
import { ContractError, catalog, lookup } from '../src/index.js';
import type { CatalogEntry } from '../src/index.js';

/**
 * Our own messages, rendered by `ContractError` from each code's template
 * with values of the kind the checks fill in, find their own code first:
 * pasted whole, and without the `[KV0xx]` and the closing pointer.
 */
const values: Record<string, string> = {
  actual: '[4, 2, 8]',
  expected: '[2, 4, 8]',
  shape: '[2, 3]',
  index: '3',
  count: '3',
  rank: '3',
  layer: '1',
  dtype: 'f32',
  backend: 'webgpu',
  constraint: 'at least 1',
  problem: 'lowFreqFactor = 4 must be below highFreqFactor = 1',
  variant: "'llama3'",
  reason: 'the adapter reports no device',
  fix: 'Check the driver',
  call: 'cuLaunchKernel',
  error: 'CUDA_ERROR_LAUNCH_FAILED',
  kernel: 'rope_pool_fused_f32',
  log: 'unresolved identifier',
};

/** The RoPE scaling checks name the field they reject, as `ropeScaling.<field>`. */
const byCode: Record<string, Record<string, string>> = {
  KV060: { arg: 'ropeScaling.type', expected: 'linear | dynamic | llama3 | yarn | longrope', actual: '"su"' },
  KV061: { arg: 'ropeScaling.original_max_position_embeddings', problem: 'is not a field of', variant: 'yarn', expected: 'factor, originalMaxPositions, betaFast, betaSlow' },
  KV062: { arg: 'ropeScaling.originalMaxPositions', constraint: 'an integer > 0', actual: '2048.5' },
  KV064: { arg: 'ropeScaling.factor', actual: '0.25' },
  KV084: { arg: 'ropeScaling.shortFactor', expected: 'R/2 = 48', actual: '64 entries' },
  KV085: { arg: 'ropeScaling.longFactor', index: '5', actual: '0', constraint: 'a finite number > 0' },
  KV086: { arg: 'mropeInterleaved', other: 'mropeSection' },
  KV087: { arg: 'mropeSection', actual: '[16, 24, 24]', expected: '64', problem: "the height stream's 24 pairs (1, 4, ..., 70) run past pair 63; every third pair from 1 holds at most 21 of them" },
};

function rendered(e: CatalogEntry): ContractError {
  const details: Record<string, string> = { ...byCode[e.code] };
  for (const p of e.placeholders) {
    if (details[p] !== undefined) continue;
    if (p === 'arg') details[p] = e.args[0] ?? 'kv';
    else if (p === 'other') details[p] = e.args[1] ?? 'vOut';
    else if (p === 'op') details[p] = e.raisedBy[0] ?? 'ropePoolFused';
    else details[p] = values[p] ?? 'x';
  }
  return new ContractError(e.code, e.raisedBy[0] ?? e.op, details);
}

const live = catalog.filter((e) => !e.retired);

describe('lookup of our own messages', () => {
  it.each(live.map((e) => [e.code, e] as const))('%s: its rendered message, without the code, ranks it first', (code, e) => {
    const message = rendered(e).message.replace(/^\[KV\d{3}\] /, '').replace(/ (?:See \S+ or run|Run) npx kvkit explain \S+$/, '');
    expect(lookup(message)[0]?.entry.code, message).toBe(code);
  });

  it.each(live.map((e) => [e.code, e] as const))('%s: the whole thrown message ranks it first', (code, e) => {
    expect(lookup(rendered(e).message)[0]?.entry.code).toBe(code);
  });
});
