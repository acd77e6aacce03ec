import { describe, expect, it } from 'vitest';
import { RecycledBuffers } from '../src/runtime/recycledBuffers.js';

/** A pool of named stand-ins for buffers, with what it dropped. */
function pool(perSize: number, maxBytes: number) {
  const dropped: string[] = [];
  let id = 0;
  const p = new RecycledBuffers<string>(perSize, maxBytes, (b) => dropped.push(b));
  const give = (name: string, bytes: number) => p.give({ buffer: name, id: id++ }, bytes);
  return { p, dropped, give };
}

describe('recycled output buffers', () => {
  it('hands back a buffer of the same size, last given first, and none of another size', () => {
    const { p, give } = pool(4, 1000);
    give('a', 100);
    give('b', 100);
    expect(p.take(200)).toBeUndefined();
    expect(p.take(100)?.buffer).toBe('b');
    expect(p.take(100)?.buffer).toBe('a');
    expect(p.take(100)).toBeUndefined();
    expect(p.bytes).toBe(0);
  });

  it('keeps at most perSize a size and drops the rest', () => {
    const { p, dropped, give } = pool(2, 1000);
    for (const name of ['a', 'b', 'c']) give(name, 10);
    expect(p.count).toBe(2);
    expect(dropped).toEqual(['c']);
  });

  it('makes room for a new size by dropping the sizes given back longest ago, never past maxBytes', () => {
    const { p, dropped, give } = pool(4, 300);
    give('old1', 100);
    give('old2', 100);
    give('mid', 50);
    // 250 kept; 200 more needs 150 freed: both of the oldest size go, the newer size stays.
    give('new', 200);
    expect(dropped).toEqual(['old1', 'old2']);
    expect(p.bytes).toBe(250);
    expect(p.take(200)?.buffer).toBe('new');
    expect(p.take(50)?.buffer).toBe('mid');
  });

  it('a size given back again moves to the end of the order', () => {
    const { dropped, give } = pool(4, 300);
    give('a', 100);
    give('b', 50);
    give('a2', 100);
    give('c', 100);
    // 350 > 300: the size given back longest ago is now 50 (b), not 100.
    expect(dropped).toEqual(['b']);
  });

  it('drops a buffer larger than the whole pool, and everything at clear()', () => {
    const { p, dropped, give } = pool(4, 100);
    give('big', 101);
    give('small', 10);
    p.clear();
    expect(dropped).toEqual(['big', 'small']);
    expect(p.count).toBe(0);
    expect(p.bytes).toBe(0);
  });
});
