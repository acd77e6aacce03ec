/**
 * The life of a stateful op such as the materializer, the same on every
 * backend: a disposed op (or one whose backend is disposed) refuses calls
 * with KV003; a call made from inside its own writeLayerKv works in fresh
 * buffers, so the views the outer call handed out keep their contents; and
 * layer views live only while their callback runs.
 */
import { ContractError } from '../errors/contractError.js';
import { deliverLayerViews } from '../runtime/layerViews.js';
import type { Workspace } from './workspace.js';

export class OpLifecycle {
  readonly #name: string;
  readonly #backend: { readonly disposed: boolean };
  #disposed = false;
  /** Layer views of some call are out (writeLayerKv is running). */
  #delivering = false;

  /** `name` is how KV003 names the op, e.g. `this KvMaterializer`. */
  constructor(name: string, backend: { readonly disposed: boolean }) {
    this.#name = name;
    this.#backend = backend;
  }

  get disposed(): boolean {
    return this.#disposed;
  }

  /** Runs one call of `op` (its arguments validated already): KV003 before any work if the op or its backend is disposed; a nested call's fresh buffers are released after. */
  call<R>(op: string, body: (call: OpCall) => R): R {
    if (this.#disposed || this.#backend.disposed) throw new ContractError('KV003', op, { arg: this.#name });
    const call = new OpCall(op, this.#delivering, (delivering) => {
      this.#delivering = delivering;
    });
    try {
      return body(call);
    } finally {
      call.end();
    }
  }

  /** Marks the op disposed; false when it already was, so its buffers are freed once. */
  dispose(): boolean {
    if (this.#disposed) return false;
    this.#disposed = true;
    return true;
  }
}

/** One call of a stateful op: where its buffers come from, and the hand-over of its layer views. */
export class OpCall {
  readonly op: string;
  /** Made from inside writeLayerKv: the kept workspaces hold the outer call's views and must stay untouched. */
  readonly nested: boolean;
  readonly #setDelivering: (delivering: boolean) => void;
  readonly #fresh: (() => void)[] = [];

  constructor(op: string, nested: boolean, setDelivering: (delivering: boolean) => void) {
    this.op = op;
    this.nested = nested;
    this.#setDelivering = setDelivering;
  }

  /** `needed` units of `workspace`: the kept buffer, or in a nested call a fresh one released when the call ends. */
  take<B>(workspace: Workspace<B>, needed: number): B {
    if (!this.nested) return workspace.take(needed, this.op);
    const buffer = workspace.fresh(needed, this.op);
    this.#fresh.push(() => workspace.giveBack(buffer));
    return buffer;
  }

  /** Hands each layer's (K, V) views to writeLayerKv and disposes them after (runtime/layerViews.ts); calls made meanwhile are nested. */
  deliverLayerViews<V extends { dispose(): void }>(layers: number, writeLayerKv: unknown, viewsOf: (layer: number) => readonly [V, V]): void {
    this.#setDelivering(true);
    try {
      deliverLayerViews(layers, writeLayerKv, viewsOf);
    } finally {
      this.#setDelivering(this.nested);
    }
  }

  /** Releases a nested call's fresh buffers (a GPU frees them in stream order, so work it enqueued still sees them). */
  end(): void {
    for (const release of this.#fresh.splice(0)) release();
  }
}
