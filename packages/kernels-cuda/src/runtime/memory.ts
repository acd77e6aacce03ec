/** Device memory with a reference count: a tensor and the materializers holding its weights share one allocation. */
export class DeviceBuffer {
  #refs = 1;

  constructor(
    /** 0 for an empty allocation. */
    readonly ptr: number,
    readonly bytes: number,
    private readonly free: (buffer: DeviceBuffer) => void,
  ) {}

  get released(): boolean {
    return this.#refs === 0;
  }

  retain(): this {
    this.#refs += 1;
    return this;
  }

  release(): void {
    if (this.#refs === 0) return;
    this.#refs -= 1;
    if (this.#refs === 0) this.free(this);
  }
}

/** A page-locked host block: DMA target of reads, reused by size class. */
export interface PinnedBlock {
  readonly ptr: bigint;
  readonly size: number;
  readonly view: ArrayBuffer;
}
