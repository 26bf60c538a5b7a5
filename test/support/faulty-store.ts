/**
 * A fault-injecting Store for unit tests of the actor layer: a real MemoryStore underneath,
 * and chosen calls made to fail (as an outage, or with a given error) or to hang until
 * released. Every call is recorded by name, so a test can assert what was (not) asked.
 */
import { MemoryStore } from '../../src/store/memory-store.js';
import type { Store } from '../../src/store/store.js';

type StoreCall = {
  [K in keyof Store]: Store[K] extends (...args: never[]) => unknown ? K : never;
}[keyof Store];

interface Fault {
  readonly kind: 'fail' | 'hang';
  readonly error: Error | null;
  /** How many more calls the fault applies to. */
  remaining: number;
}

export class FaultyStore {
  /** The store to hand to the code under test. */
  readonly store: Store;
  /** The real store underneath (to change data behind the coordinator's back). */
  readonly inner = new MemoryStore({ keyPrefix: 'kp', auditMaxLen: 100 });
  /** Names of the calls made, in order. */
  readonly calls: StoreCall[] = [];
  private readonly faults = new Map<StoreCall, Fault>();
  private readonly held: Array<() => void> = [];

  constructor(kind: Store['kind'] = 'memory') {
    const inner = this.inner as unknown as Record<string, unknown>;
    this.store = new Proxy(this.inner, {
      get: (_target, prop) => {
        if (prop === 'kind') return kind;
        const value = inner[prop as string];
        if (typeof value !== 'function') return value;
        const call = prop as StoreCall;
        return (...args: unknown[]) => {
          this.calls.push(call);
          const run = () =>
            (value as (...a: unknown[]) => Promise<unknown>).apply(this.inner, args);
          const fault = this.faults.get(call);
          if (!fault || fault.remaining <= 0) return run();
          fault.remaining--;
          if (fault.kind === 'fail') return Promise.reject(fault.error ?? new Error('injected'));
          return new Promise((resolve, reject) => {
            this.held.push(() => run().then(resolve, reject));
          });
        };
      },
    });
  }

  /** Makes the next `times` calls of `call` fail (by default as a connection error would). */
  fail(call: StoreCall, options: { error?: Error; times?: number } = {}): void {
    const error = options.error ?? new Error('connection refused (injected)');
    this.faults.set(call, { kind: 'fail', error, remaining: options.times ?? Infinity });
  }

  /** Makes the next `times` calls of `call` wait until {@link release}. */
  hang(call: StoreCall, options: { times?: number } = {}): void {
    this.faults.set(call, { kind: 'hang', error: null, remaining: options.times ?? Infinity });
  }

  /** Lets every held call go on (they then run against the real store). */
  release(): void {
    for (const go of this.held.splice(0)) go();
  }

  /** Removes the faults (of one call, or all). */
  heal(call?: StoreCall): void {
    if (call) this.faults.delete(call);
    else this.faults.clear();
  }

  /** How many times `call` was made. */
  count(call: StoreCall): number {
    return this.calls.filter((c) => c === call).length;
  }

  /** Calls held by {@link hang}, not yet released. */
  get pending(): number {
    return this.held.length;
  }
}
