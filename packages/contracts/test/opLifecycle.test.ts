import { describe, expect, it } from 'vitest';
import { OpLifecycle, Workspace } from '../src/backend/index.js';
import type { OpCall } from '../src/backend/index.js';

/** A view that records its disposal. */
class View {
  disposed = false;
  constructor(readonly layer: number) {}
  dispose(): void {
    this.disposed = true;
  }
}

function setup() {
  const backend = { disposed: false };
  const live = new Set<number[]>();
  const workspace = new Workspace<number[]>({
    allocate: (capacity) => {
      const b = new Array<number>(capacity).fill(0);
      live.add(b);
      return b;
    },
    release: (b) => live.delete(b),
  });
  return { backend, live, workspace, life: new OpLifecycle('this KvMaterializer', backend) };
}

describe('OpLifecycle', () => {
  it('refuses calls with KV003 naming the op once it or its backend is disposed; dispose reports the first time only', () => {
    const a = setup();
    expect(a.life.call('KvMaterializer.materialize', () => 7)).toBe(7);
    expect(a.life.dispose()).toBe(true);
    expect(a.life.dispose()).toBe(false);
    expect(() => a.life.call('KvMaterializer.materialize', () => 0)).toThrow(expect.objectContaining({ code: 'KV003', message: expect.stringContaining('this KvMaterializer') }));
    const b = setup();
    b.backend.disposed = true;
    let ran = false;
    expect(() => b.life.call('KvMaterializer.materializeInto', () => (ran = true))).toThrow(expect.objectContaining({ code: 'KV003' }));
    expect(ran).toBe(false);
  });

  it('a call made from writeLayerKv works in fresh buffers, released when it ends; the outer views keep their contents', () => {
    const { live, workspace, life } = setup();
    const seen: { nested: boolean; fresh: boolean }[] = [];
    let kept: number[] | undefined;
    const views: View[] = [];
    const materialize = (fill: number, inner?: () => void) =>
      life.call('KvMaterializer.materialize', (call: OpCall) => {
        const buffer = call.take(workspace, 5);
        buffer.fill(fill);
        kept ??= buffer;
        seen.push({ nested: call.nested, fresh: buffer !== kept });
        call.deliverLayerViews(2, (_layer: number, k: View) => {
          expect(k.disposed).toBe(false);
          const buffers = live.size;
          inner?.();
          // The inner call's fresh buffers are gone once it returns; the outer one still holds its values.
          expect(live.size).toBe(buffers);
          expect(kept!.every((x) => x === 1)).toBe(true);
          views.push(k);
        }, (l) => [new View(l), new View(l)]);
      });
    materialize(1, () => materialize(2, () => materialize(3)));
    expect(seen.slice(0, 3)).toEqual([
      { nested: false, fresh: false },
      { nested: true, fresh: true },
      { nested: true, fresh: true },
    ]);
    expect(views.every((v) => v.disposed)).toBe(true);
    expect(live.size).toBe(1);
    // After the outer call the next one is not nested, even if a callback threw.
    expect(() => materialize(1, () => {
      throw new Error('callback failed');
    })).toThrow('callback failed');
    materialize(1);
    expect(seen.at(-1)).toEqual({ nested: false, fresh: false });
  });
});
