// A minimal synchronous notification: listeners are called in order, and one that throws
// cannot stop the others (its error goes to onError).

export class Signal<T = void> {
  private listeners = new Set<(value: T) => void>();

  constructor(private readonly onError: (e: unknown) => void = () => {}) {}

  on(fn: (value: T) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  emit(value: T): void {
    for (const fn of this.listeners) {
      try {
        fn(value);
      } catch (e) {
        this.onError(e);
      }
    }
  }

  get size(): number {
    return this.listeners.size;
  }
}
