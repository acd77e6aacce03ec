/**
 * Hands each layer's K and V views to `writeLayerKv`, in layer order, and
 * disposes both as soon as the callback returns or throws: the views are
 * valid only during the call (API.md), on every backend.
 */
export function deliverLayerViews<V extends { dispose(): void }>(layers: number, writeLayerKv: unknown, viewsOf: (layer: number) => readonly [V, V]): void {
  const write = writeLayerKv as (layer: number, k: V, v: V) => unknown;
  for (let l = 0; l < layers; l++) {
    const [k, v] = viewsOf(l);
    try {
      write(l, k, v);
    } finally {
      k.dispose();
      v.dispose();
    }
  }
}
