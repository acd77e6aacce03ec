/**
 * Workspaces kept between calls (ARCHITECTURE.md: no op allocates in its
 * steady state). Capacity is counted in the unit the op sizes by (tokens for
 * the materializer's buffers, bytes for a plain scratch) and grows by
 * doubling, so a growing workload allocates O(log n) times.
 */

/** The capacity to allocate when `needed` exceeds `held`: at least double, so growth stops soon. */
export function grownCapacity(held: number, needed: number): number {
  return Math.max(needed, 2 * held);
}

/** How a backend makes and frees the buffers of one workspace. */
export interface WorkspaceMemory<B> {
  /** A buffer for `capacity` units; `op` is the call that needs it, for an error raised while allocating. */
  allocate(capacity: number, op: string): B;
  release(buffer: B): void;
}

/** One reusable buffer, grown by doubling; `fresh` gives one apart from it for a call that must leave it alone. */
export class Workspace<B> {
  readonly #memory: WorkspaceMemory<B>;
  #buffer: B | undefined;
  #capacity = 0;

  constructor(memory: WorkspaceMemory<B>) {
    this.#memory = memory;
  }

  /** Units the kept buffer holds (0 before the first call). */
  get capacity(): number {
    return this.#capacity;
  }

  /** The kept buffer, first grown to `needed` units if it holds fewer. */
  take(needed: number, op: string): B {
    if (this.#buffer === undefined || this.#capacity < needed) {
      const capacity = grownCapacity(this.#capacity, needed);
      if (this.#buffer !== undefined) this.#memory.release(this.#buffer);
      // Forgotten before allocating: if that throws, no released buffer is handed out later.
      this.#buffer = undefined;
      this.#capacity = 0;
      this.#buffer = this.#memory.allocate(capacity, op);
      this.#capacity = capacity;
    }
    return this.#buffer;
  }

  /** A new buffer of exactly `needed` units, not kept: the caller releases it with `giveBack`. */
  fresh(needed: number, op: string): B {
    return this.#memory.allocate(needed, op);
  }

  giveBack(buffer: B): void {
    this.#memory.release(buffer);
  }

  /** Frees the kept buffer; the next `take` allocates again. */
  release(): void {
    if (this.#buffer !== undefined) this.#memory.release(this.#buffer);
    this.#buffer = undefined;
    this.#capacity = 0;
  }
}
