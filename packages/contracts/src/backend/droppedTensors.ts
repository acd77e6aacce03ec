/**
 * The backstop for owned tensors the application drops without `dispose()`:
 * once the garbage collector has taken such a tensor, its storage is released
 * as `dispose()` would have done. `dispose()` stays the rule (a collection may
 * come late or never); a backend watches only storage it allocated itself,
 * never wrapped memory or a view's.
 */
export class DroppedTensors<S> {
  readonly #registry: FinalizationRegistry<S>;

  /** `release` gets the storage of a collected tensor; it must not touch the tensor (it is gone). */
  constructor(release: (storage: S) => void) {
    this.#registry = new FinalizationRegistry(release);
  }

  /** Releases `storage` when `tensor` is collected undisposed; `storage` must not reference `tensor`. */
  watch(tensor: object, storage: S): void {
    this.#registry.register(tensor, storage, tensor);
  }

  /** `tensor` was disposed (its storage released by it): nothing is left to do at its collection. */
  forget(tensor: object): void {
    this.#registry.unregister(tensor);
  }
}
