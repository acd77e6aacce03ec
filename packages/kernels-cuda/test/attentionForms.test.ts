import { isContractError } from '@kvkit/contracts';
import type { BackendKernels, PagedAttentionChecked } from '@kvkit/contracts/backend';
import { describe, expect, it } from 'vitest';
import { CUDA_ATTENTION_MAX_HEAD_DIM, guardAttentionForms, unsupportedAttentionForm } from '../src/runtime/attentionForms.js';

/** The forms of pagedAttention the contract allows but the CUDA kernel does not take yet refuse with KV098, before the kernel runs. */
const call = (D: number, Dv: number) => ({ dims: { N: 1, Hq: 16, H: 1, D, Dv, S: 8, B1: 2, C: 4 } }) as unknown as PagedAttentionChecked;

describe('pagedAttention forms on CUDA', () => {
  it('takes V rows as wide as K rows up to its widest tile, and names what it does not take', () => {
    expect(unsupportedAttentionForm(call(128, 128))).toBeUndefined();
    expect(unsupportedAttentionForm(call(CUDA_ATTENTION_MAX_HEAD_DIM, CUDA_ATTENTION_MAX_HEAD_DIM))).toBeUndefined();
    expect(unsupportedAttentionForm(call(576, 512))).toMatchObject({ arg: 'vHeadDim', actual: 512 });
    expect(unsupportedAttentionForm(call(320, 320))).toMatchObject({ arg: 'headDim', actual: 320 });
  });

  it('throws KV098 naming the backend and the argument, and never reaches the kernel', () => {
    const reached: unknown[] = [];
    const kernels = { label: 'cuda backend #1 (test)', pagedAttention: (args: unknown) => reached.push(args) } as unknown as BackendKernels;
    guardAttentionForms(kernels);
    let error: unknown;
    try {
      kernels.pagedAttention!(call(576, 512));
    } catch (e) {
      error = e;
    }
    expect(isContractError(error) && error.code).toBe('KV098');
    expect((error as Error).message).toMatch(/^\[KV098\] pagedAttention: cuda backend #1 \(test\) does not run vHeadDim = 512 yet: /);
    expect(reached).toEqual([]);
    kernels.pagedAttention!(call(128, 128));
    expect(reached.length).toBe(1);
  });

  it('leaves kernels without pagedAttention as they are (backend.ops keeps it out)', () => {
    const kernels = { label: 'bare' } as unknown as BackendKernels;
    guardAttentionForms(kernels);
    expect(kernels.pagedAttention).toBeUndefined();
  });
});
