/**
 * An application's own CUDA, as an engine embedding kvkit has it: its stream,
 * its allocations and copies, made through libcuda directly (its own koffi
 * bindings, not the package's), so the checks see kvkit work on memory and
 * streams it did not make.
 */
import koffi from 'koffi';
import { LIBCUDA } from '../src/index.js';

type Fn = ReturnType<ReturnType<typeof koffi.load>['func']>;

export class ApplicationCuda {
  readonly #f: Record<string, Fn>;
  readonly context: bigint;
  /** The application's stream, made non-blocking as engines make theirs. */
  readonly stream: bigint;
  readonly #allocations = new Set<bigint>();
  readonly #streams: bigint[] = [];
  readonly #events: bigint[] = [];

  constructor() {
    const lib = koffi.load(LIBCUDA);
    const decls = {
      cuInit: 'int cuInit(unsigned int flags)',
      cuDevicePrimaryCtxRetain: 'int cuDevicePrimaryCtxRetain(_Out_ void **ctx, int dev)',
      cuDevicePrimaryCtxRelease: 'int cuDevicePrimaryCtxRelease_v2(int dev)',
      cuCtxSetCurrent: 'int cuCtxSetCurrent(void *ctx)',
      cuStreamCreate: 'int cuStreamCreate(_Out_ void **stream, unsigned int flags)',
      cuStreamDestroy: 'int cuStreamDestroy_v2(void *stream)',
      cuStreamSynchronize: 'int cuStreamSynchronize(void *stream)',
      cuStreamWaitEvent: 'int cuStreamWaitEvent(void *stream, void *event, unsigned int flags)',
      cuEventCreate: 'int cuEventCreate(_Out_ void **event, unsigned int flags)',
      cuEventRecord: 'int cuEventRecord(void *event, void *stream)',
      cuEventDestroy: 'int cuEventDestroy_v2(void *event)',
      cuMemAlloc: 'int cuMemAlloc_v2(_Out_ uint64_t *dptr, size_t bytes)',
      cuMemFree: 'int cuMemFree_v2(uint64_t dptr)',
      cuMemcpyHtoDAsync: 'int cuMemcpyHtoDAsync_v2(uint64_t dst, void *src, size_t bytes, void *stream)',
      cuMemcpyDtoHAsync: 'int cuMemcpyDtoHAsync_v2(void *dst, uint64_t src, size_t bytes, void *stream)',
      cuMemcpyDtoDAsync: 'int cuMemcpyDtoDAsync_v2(uint64_t dst, uint64_t src, size_t bytes, void *stream)',
      cuMemsetD8Async: 'int cuMemsetD8Async(uint64_t dst, uint8_t value, size_t count, void *stream)',
    } as const;
    this.#f = Object.fromEntries(Object.entries(decls).map(([name, decl]) => [name, lib.func(decl)]));
    this.#call('cuInit', 0);
    const ctx: (bigint | null)[] = [null];
    this.#call('cuDevicePrimaryCtxRetain', ctx, 0);
    this.context = ctx[0]!;
    this.#call('cuCtxSetCurrent', this.context);
    this.stream = this.newStream();
  }

  #call(name: string, ...args: unknown[]): void {
    const status = this.#f[name]!(...args) as number;
    if (status !== 0) throw new Error(`application: ${name} failed with CUDA error ${status}`);
  }

  newStream(): bigint {
    const s: (bigint | null)[] = [null];
    this.#call('cuStreamCreate', s, 1);
    this.#streams.push(s[0]!);
    return s[0]!;
  }

  /** Device memory from cuMemAlloc, as a bigint `CUdeviceptr`. */
  alloc(bytes: number): bigint {
    const p = [0n];
    this.#call('cuMemAlloc', p, bytes);
    const ptr = BigInt(p[0]!);
    this.#allocations.add(ptr);
    return ptr;
  }

  free(ptr: bigint): void {
    this.#allocations.delete(ptr);
    this.#call('cuMemFree', ptr);
  }

  /** Enqueues a copy of host bytes on `stream`; the source must stay untouched until the stream passes it. */
  upload(dst: bigint, src: ArrayBufferView, stream = this.stream): void {
    this.#call('cuMemcpyHtoDAsync', dst, src, src.byteLength, stream);
  }

  copy(dst: bigint, src: bigint, bytes: number, stream = this.stream): void {
    this.#call('cuMemcpyDtoDAsync', dst, src, bytes, stream);
  }

  fill(dst: bigint, byte: number, bytes: number, stream = this.stream): void {
    this.#call('cuMemsetD8Async', dst, byte, bytes, stream);
  }

  /** The bytes at `src` once everything enqueued on `stream` so far has run. */
  download(src: bigint, bytes: number, stream = this.stream): Uint8Array {
    const out = new Uint8Array(bytes);
    this.#call('cuMemcpyDtoHAsync', out, src, bytes, stream);
    this.synchronize(stream);
    return out;
  }

  synchronize(stream = this.stream): void {
    this.#call('cuStreamSynchronize', stream);
  }

  /** Makes `waiter` wait for everything enqueued on `on` so far (an event recorded there). */
  order(waiter: bigint, on: bigint): void {
    const e: (bigint | null)[] = [null];
    this.#call('cuEventCreate', e, 2);
    this.#events.push(e[0]!);
    this.#call('cuEventRecord', e[0]!, on);
    this.#call('cuStreamWaitEvent', waiter, e[0]!, 0);
  }

  close(): void {
    for (const s of this.#streams) this.#call('cuStreamSynchronize', s);
    for (const p of this.#allocations) this.#call('cuMemFree', p);
    for (const e of this.#events) this.#call('cuEventDestroy', e);
    for (const s of this.#streams) this.#call('cuStreamDestroy', s);
    this.#call('cuDevicePrimaryCtxRelease', 0);
  }
}
