/** What settles a wait for the runtime's answer (an open, a subscribe). */
export interface Waiter<E extends Error = Error> {
  resolve(): void;
  reject(e: E): void;
}

/**
 * A waiter that also gives up: `onTimeout` runs after `ms` unless `resolve` or `reject` ran first, and the timer is
 * cleared when either runs (so a settled wait holds no timer).
 */
export function guardedWaiter<E extends Error>(
  ms: number,
  onTimeout: () => void,
  settle: { resolve(): void; reject(e: E): void },
): Waiter<E> {
  const guard = setTimeout(onTimeout, ms);
  return {
    resolve: () => {
      clearTimeout(guard);
      settle.resolve();
    },
    reject: (e) => {
      clearTimeout(guard);
      settle.reject(e);
    },
  };
}
