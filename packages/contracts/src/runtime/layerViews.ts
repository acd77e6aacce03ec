import { ContractError } from '../errors/contractError.js';

/**
 * Hands each layer's K and V views to `writeLayerKv`, in layer order, and
 * disposes both as soon as the callback returns or throws: the views are
 * valid only during the call (API.md), on every backend. A callback that
 * returns a thenable (an `async` one) is refused with KV044 after its first
 * layer: what it awaits would run after its views were gone.
 */
export function deliverLayerViews<V extends { dispose(): void }>(layers: number, writeLayerKv: unknown, viewsOf: (layer: number) => readonly [V, V]): void {
  const write = writeLayerKv as (layer: number, k: V, v: V) => unknown;
  for (let l = 0; l < layers; l++) {
    const [k, v] = viewsOf(l);
    let returned: unknown;
    try {
      returned = write(l, k, v);
    } finally {
      k.dispose();
      v.dispose();
    }
    if (isThenable(returned)) {
      // Its rejection (KV027, from touching a disposed view) is answered by the error below; left unhandled it would crash Node.
      returned.then(undefined, () => {});
      throw new ContractError('KV044', 'KvMaterializer.materialize', {
        arg: 'writeLayerKv',
        expected: 'a synchronous function (start backend.read(k) inside it and await the reads after materialize returns)',
        actual: 'a function that returned a promise',
      });
    }
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (typeof value === 'object' || typeof value === 'function') && value !== null && typeof (value as { then?: unknown }).then === 'function';
}
