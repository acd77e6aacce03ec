import { describe, expect, it } from 'vitest';
import { grownCapacity, Workspace } from '../src/backend/index.js';

/** A memory that counts what it hands out and takes back. */
function countingMemory() {
  const log = { allocated: [] as number[], released: [] as number[], live: new Set<{ capacity: number }>() };
  const memory = {
    allocate: (capacity: number) => {
      const buffer = { capacity };
      log.allocated.push(capacity);
      log.live.add(buffer);
      return buffer;
    },
    release: (buffer: { capacity: number }) => {
      log.released.push(buffer.capacity);
      log.live.delete(buffer);
    },
  };
  return { memory, log };
}

describe('Workspace', () => {
  it('grows by doubling (or to the need where that is more) and allocates nothing in steady state', () => {
    const { memory, log } = countingMemory();
    const w = new Workspace(memory);
    const capacities = [8, 8, 5, 9, 16, 12, 17, 40, 33, 1, 150].map((needed) => {
      const buffer = w.take(needed, 'op');
      expect(buffer.capacity).toBeGreaterThanOrEqual(needed);
      return w.capacity;
    });
    expect(capacities).toEqual([8, 8, 8, 16, 16, 16, 32, 64, 64, 64, 150]);
    expect(log.allocated).toEqual([8, 16, 32, 64, 150]);
    expect(log.released).toEqual([8, 16, 32, 64]);
    expect(log.live.size).toBe(1);
    expect(grownCapacity(40, 41)).toBe(80);
  });

  it('fresh buffers are not kept; release frees the kept one and the next take allocates again', () => {
    const { memory, log } = countingMemory();
    const w = new Workspace(memory);
    const kept = w.take(6, 'op');
    const fresh = w.fresh(5, 'op');
    expect(fresh).not.toBe(kept);
    expect(w.take(6, 'op')).toBe(kept);
    w.giveBack(fresh);
    w.release();
    expect(log.live.size).toBe(0);
    expect(w.capacity).toBe(0);
    expect(w.take(3, 'op').capacity).toBe(3);
  });

  it('an allocation that throws leaves no released buffer behind', () => {
    let fail = false;
    const w = new Workspace({
      allocate: (capacity: number, op: string) => {
        if (fail) throw new Error(`${op}: out of memory`);
        return { capacity };
      },
      release: () => {},
    });
    w.take(4, 'op');
    fail = true;
    expect(() => w.take(100, 'grow')).toThrow('grow: out of memory');
    expect(w.capacity).toBe(0);
    fail = false;
    expect(w.take(2, 'op').capacity).toBe(2);
  });
});
