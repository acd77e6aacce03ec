/**
 * Buffers of op outputs that were freed, kept by byte size for the next
 * output of that size (allocateOverwritten), so a loop of calls allocates and
 * zero-fills nothing. At most `perSize` a size and `maxBytes` in all; a buffer
 * that does not fit makes room by dropping the sizes given back longest ago,
 * so a loop over new shapes is not left allocating past buffers of old ones.
 */
export interface Recycled<B> {
  readonly buffer: B;
  readonly id: number;
}

export class RecycledBuffers<B> {
  /** Sizes in the order they were last given back, oldest first (a Map keeps insertion order). */
  readonly #bySize = new Map<number, Recycled<B>[]>();
  #bytes = 0;

  constructor(
    readonly perSize: number,
    readonly maxBytes: number,
    /** What becomes of a buffer the pool drops or refuses. */
    readonly drop: (buffer: B) => void,
  ) {}

  get count(): number {
    let n = 0;
    for (const list of this.#bySize.values()) n += list.length;
    return n;
  }

  get bytes(): number {
    return this.#bytes;
  }

  /** A buffer of exactly `bytes`, or undefined. */
  take(bytes: number): Recycled<B> | undefined {
    const list = this.#bySize.get(bytes);
    const found = list?.pop();
    if (!found) return undefined;
    this.#bytes -= bytes;
    if (list!.length === 0) this.#bySize.delete(bytes);
    return found;
  }

  /** Keeps a freed buffer of `bytes`, or drops it where it may not be kept. */
  give(entry: Recycled<B>, bytes: number): void {
    const list = this.#bySize.get(bytes) ?? [];
    if (bytes > this.maxBytes || list.length >= this.perSize) {
      this.drop(entry.buffer);
      return;
    }
    for (const [size, older] of this.#bySize) {
      if (this.#bytes + bytes <= this.maxBytes) break;
      if (size === bytes) continue;
      while (older.length > 0 && this.#bytes + bytes > this.maxBytes) {
        this.drop(older.shift()!.buffer);
        this.#bytes -= size;
      }
      if (older.length === 0) this.#bySize.delete(size);
    }
    if (this.#bytes + bytes > this.maxBytes) {
      this.drop(entry.buffer);
      return;
    }
    list.push(entry);
    // Given back now: this size moves to the end of the order.
    this.#bySize.delete(bytes);
    this.#bySize.set(bytes, list);
    this.#bytes += bytes;
  }

  /** Drops every buffer kept, through `drop` (the pool's own by default). */
  clear(drop: (buffer: B) => void = this.drop): void {
    for (const list of this.#bySize.values()) for (const e of list) drop(e.buffer);
    this.#bySize.clear();
    this.#bytes = 0;
  }
}
