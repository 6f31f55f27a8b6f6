/**
 * Calls an application's callback (onPresence, onRecovery, onStateChange) from inside the connection's frame handling:
 * a throw there must not escape into the socket's event (an uncaught exception ends the process) nor stop the frame's
 * handling half way; it is told as a process warning instead.
 */
export function callBack<A extends unknown[]>(
  name: string,
  fn: ((...args: A) => unknown) | undefined,
  ...args: A
): void {
  if (!fn) return;
  try {
    const out = fn(...args);
    if (out instanceof Promise) out.catch((e: unknown) => warn(name, e));
  } catch (e) {
    warn(name, e);
  }
}

function warn(name: string, e: unknown): void {
  process.emitWarning(e instanceof Error ? e : new Error(String(e)), {
    type: 'EventMeshCallbackWarning',
    detail: `${name} threw`,
  });
}
