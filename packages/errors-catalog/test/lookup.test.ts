import { describe, expect, it } from 'vitest';
import { ContractError, lookup, setDocsBase, words } from '../src/index.js';

// Messages as the original system prints them (the seeds' conditions), with the code each maps to.
const upstream: [string, string][] = [
  ['ValueError: positions must match ctx_hidden token count for fused KV materialization: positions=7, total_ctx=8.', 'KV023'],
  ['positions/slots must have one entry per token', 'KV034'],
  ['Invalid k_out shape for fused KV materialization: got (8, 5, 8, 128), expected (5, 8, 8, 128).', 'KV014'],
  ['Invalid stacked fused KV projection shape: got (8, 10240), expected 3D [total_ctx, n_layers, kv_size*2].', 'KV010'],
  ['Invalid stacked eps shape for fused KV materialization: got (), expected (5,).', 'KV013'],
  ['Invalid fused KV projection shape: got (8, 5, 2000), expected trailing dim 2048.', 'KV011'],
  ['Invalid fused KV rotary/head dim pair: rotary_dim=130, head_dim=128.', 'KV007'],
  ['Invalid stacked k_norm_weight shape for fused KV materialization: got (128,), expected (5, 128).', 'KV012'],
  ['rope_pool_fused expects q/k/v to be 3-D', 'KV030'],
  ['k_pool has incompatible shape torch.Size([4096, 8, 64])', 'KV036'],
];

describe('lookup', () => {
  it('splits identifiers the way both systems spell them', () => {
    expect(words('kNormWeight')).toEqual(words('k_norm_weight'));
    expect(words('ctxHidden token count')).toEqual(words('ctx_hidden tokens counts'));
  });

  it.each(upstream)('finds our page first for the upstream message %#', (message, code) => {
    expect(lookup(message)[0]?.entry.code).toBe(code);
  });

  // The CUDA driver's names (and its strings) for the failures a CUDA backend reports.
  const cudaErrors: [string, string][] = [
    ['CUDA_ERROR_ILLEGAL_ADDRESS', 'KV053'],
    ['CUDA_ERROR_LAUNCH_FAILED', 'KV053'],
    ['CUDA_ERROR_OUT_OF_MEMORY', 'KV053'],
    ['CUDA_ERROR_NO_BINARY_FOR_GPU', 'KV053'],
    ['RuntimeError: CUDA error: an illegal memory access was encountered', 'KV053'],
    ['CUDA_ERROR_NO_DEVICE', 'KV052'],
    ['no CUDA-capable device is detected', 'KV052'],
  ];
  it.each(cudaErrors)('ranks the CUDA driver error %s under %s first', (message, code) => {
    expect(lookup(message)[0]?.entry.code).toBe(code);
  });

  it('finds the code of a pasted ContractError, with or without a docs link', () => {
    const made = () => new ContractError('KV053', 'sync', { call: 'cuStreamSynchronize', error: 'CUDA_ERROR_ILLEGAL_ADDRESS', reason: 'an illegal memory access was encountered' });
    try {
      expect(lookup(made().message)[0]?.entry.code).toBe('KV053');
      setDocsBase('http://localhost:4321/');
      expect(lookup(made().message)[0]?.entry.code).toBe('KV053');
    } finally {
      setDocsBase(undefined);
    }
  });

  it('reads nothing into the closing CLI command of a message', () => {
    expect(words('Run npx kvkit explain KV012')).toEqual([]);
    expect(words('kOut has shape [4]. See http://x.test/errors/kv012/ or run npx kvkit explain KV012')).toEqual(words('kOut has shape [4]'));
  });

  it('puts a code named in the text first, whatever the words', () => {
    expect(lookup('[KV012] something else entirely')[0]?.entry.code).toBe('KV012');
  });

  it('looks up a long pasted traceback without the patterns backtracking for minutes', () => {
    const frame = 'File "/usr/lib/python3/site-packages/vllm/model_executor/layers/rotary_embedding/mrope.py", line 251, in __init__ ';
    const traceback = `${frame.repeat(200)}\nassert sum(self.mrope_section) == rotary_dim // 2\nAssertionError`;
    const started = performance.now();
    expect(lookup(traceback)[0]?.entry.code).toBe('KV065');
    expect(lookup(frame.repeat(200))).toBeDefined();
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('returns nothing for text unrelated to any entry', () => {
    expect(lookup('the quick brown fox jumps')).toEqual([]);
  });
});
