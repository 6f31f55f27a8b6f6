import { AsyncLocalStorage } from 'node:async_hooks';
import { Context, ContextManager, ROOT_CONTEXT } from '@opentelemetry/api';

/**
 * The OpenTelemetry context manager on Node's AsyncLocalStorage: the active context follows async calls, so a
 * span started inside `context.with(...)` finds its parent after an `await`. The Temporal SDK's interceptors
 * need it (the client's start-workflow span is handed to the workflow through the active context). What
 * @opentelemetry/context-async-hooks ships as AsyncLocalStorageContextManager, without its event-emitter
 * binding, which nothing here uses.
 */
export class AsyncLocalStorageContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();

  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }

  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    context: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    const bound = thisArg === undefined ? fn : fn.bind(thisArg);
    return this.storage.run(context, bound as (...args: A) => ReturnType<F>, ...args);
  }

  bind<T>(context: Context, target: T): T {
    if (typeof target !== 'function') return target;
    // eslint-disable-next-line @typescript-eslint/no-this-alias
    const manager = this;
    return function (this: unknown, ...args: unknown[]) {
      return manager.with(context, () => (target as (...a: unknown[]) => unknown).apply(this, args));
    } as T;
  }

  enable(): this {
    return this;
  }

  disable(): this {
    this.storage.disable();
    return this;
  }
}
