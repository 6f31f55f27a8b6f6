import { createLogger } from '@libs/logging';
import { reasonOf } from './boot-error';

export type ShutdownStep = readonly [name: string, close: () => Promise<unknown> | unknown];

const log = createLogger('Shutdown');

/**
 * Runs shutdown steps one after the other, each to its end whatever the others did (a step that fails is logged and
 * the next one runs). A step still running after `slowMs` is logged at error level by name, and again every
 * `slowMs`, so a shutdown that hangs says what holds it instead of hanging silently.
 */
export async function shutdownInOrder(scope: string, steps: readonly ShutdownStep[], slowMs = 10_000): Promise<void> {
  for (const [name, close] of steps) {
    const started = Date.now();
    const slow = setInterval(
      () => log.error({ scope, step: name, runningMs: Date.now() - started }, 'shutdown step still running'),
      slowMs,
    );
    try {
      await close();
    } catch (e) {
      log.warn({ scope, step: name, error: reasonOf(e) }, 'shutdown step failed');
    } finally {
      clearInterval(slow);
    }
  }
}
