import { ContractError } from '@kvkit/contracts';
import { describeValue } from '@kvkit/contracts/backend';
import type { CudaDriver } from './driver.js';

/** A `CUstream` handle as the application holds it: a bigint, or a number where its bindings give numbers. */
export type StreamHandle = bigint | number;

/** A stream the application made, the context it belongs to and that context's device ordinal. */
export interface CallerStream {
  readonly stream: bigint;
  readonly context: bigint;
  readonly ordinal: number;
}

const OP = 'createCudaBackend';

/** The handle as a bigint; KV044 for anything but a non-zero integer (0, the legacy default stream, would serialise with everything). */
export function streamHandle(value: unknown): bigint {
  const ok = (typeof value === 'bigint' && value > 0n) || (typeof value === 'number' && Number.isSafeInteger(value) && value > 0);
  if (!ok) throw new ContractError('KV044', OP, { arg: 'stream', expected: 'a CUstream handle: a non-zero bigint or number the application made with cuStreamCreate', actual: describeValue(value) });
  return BigInt(value as StreamHandle);
}

/**
 * The stream's context (cuStreamGetCtx) and its device's ordinal. The device
 * is read with the context pushed and popped again, so the thread's current
 * context stays the one the application left. A handle the driver does not
 * know fails with KV053 (CUDA_ERROR_INVALID_HANDLE or _CONTEXT).
 */
export function resolveCallerStream(cu: CudaDriver, stream: bigint, deviceCount: number): CallerStream {
  const check = (call: string, status: number) => cu.check(OP, call, status);
  const ctx: (bigint | null)[] = [null];
  check('cuStreamGetCtx', cu.cuStreamGetCtx(stream, ctx));
  const context = ctx[0]!;
  check('cuCtxPushCurrent', cu.cuCtxPushCurrent(context));
  const dev = [0];
  const got = cu.cuCtxGetDevice(dev);
  const popped: (bigint | null)[] = [null];
  check('cuCtxPopCurrent', cu.cuCtxPopCurrent(popped));
  check('cuCtxGetDevice', got);
  for (let ordinal = 0; ordinal < deviceCount; ordinal++) {
    const handle = [0];
    check('cuDeviceGet', cu.cuDeviceGet(handle, ordinal));
    if (handle[0] === dev[0]) return { stream, context, ordinal };
  }
  throw new ContractError('KV044', OP, { arg: 'stream', expected: `a stream on one of the ${deviceCount} device(s) this process sees`, actual: `a stream on device handle ${dev[0]}` });
}
