import { ContractError } from '@kvkit/contracts';
import type { BackendKernels, PagedAttentionChecked } from '@kvkit/contracts/backend';

/** The largest head dim the CUDA attention kernel takes (its tiles' widest rows). */
export const CUDA_ATTENTION_MAX_HEAD_DIM = 256;

/**
 * Why the CUDA attention kernel does not take a call yet, or undefined where it does: the
 * contract allows head dims up to 576 and V rows narrower than K rows (MLA's latent pool,
 * vHeadDim = kv_lora_rank), which the CPU reference and WebGPU run.
 */
export function unsupportedAttentionForm(args: Pick<PagedAttentionChecked, 'dims'>): { arg: string; actual: number; reason: string } | undefined {
  const { D, Dv } = args.dims;
  if (Dv !== D) return { arg: 'vHeadDim', actual: Dv, reason: `the CUDA kernel reads V rows as wide as K rows (vHeadDim = headDim = ${D}); multi-head latent attention runs on the CPU and WebGPU backends for now` };
  if (D > CUDA_ATTENTION_MAX_HEAD_DIM) return { arg: 'headDim', actual: D, reason: `the CUDA kernel takes head dims up to ${CUDA_ATTENTION_MAX_HEAD_DIM}` };
  return undefined;
}

/** Puts the form check (KV098) in front of the kernels' pagedAttention, where they have one, before any of it runs. */
export function guardAttentionForms(kernels: BackendKernels): void {
  const run = kernels.pagedAttention?.bind(kernels);
  if (!run) return;
  const guarded = (args: PagedAttentionChecked) => {
    const refused = unsupportedAttentionForm(args);
    if (refused) throw new ContractError('KV098', 'pagedAttention', { backend: kernels.label, ...refused }, args.dims as Record<string, number>);
    return run(args);
  };
  Object.defineProperty(kernels, 'pagedAttention', { value: guarded, configurable: true, writable: true });
}
