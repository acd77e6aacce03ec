import { ContractError } from '@kvkit/contracts';

/** KV052: no CUDA here (no driver, no device, or a package built without kernels): thrown at once by createCudaBackend. */
export function cudaUnavailable(reason: string, fix: string): ContractError {
  return new ContractError('KV052', 'createCudaBackend', { reason, fix }, {});
}

/** KV053: a driver (or cuBLASLt) call returned an error; `error` is its CUDA_ERROR_… (or CUBLAS_STATUS_…) name. */
export function cudaCallFailed(op: string, call: string, error: string, reason: string, dims: Readonly<Record<string, number>> = {}): ContractError {
  return new ContractError('KV053', op, { call, error, reason }, dims);
}
