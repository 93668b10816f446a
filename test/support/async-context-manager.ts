import { ROOT_CONTEXT, type Context, type ContextManager } from '@opentelemetry/api';
import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The active context carried across awaits, as the Node SDK's AsyncLocalStorage context manager
 * does (that package is not a dependency here): parent/child relations need one.
 */
export class AsyncContextManager implements ContextManager {
  private readonly storage = new AsyncLocalStorage<Context>();
  active(): Context {
    return this.storage.getStore() ?? ROOT_CONTEXT;
  }
  with<A extends unknown[], F extends (...args: A) => ReturnType<F>>(
    ctx: Context,
    fn: F,
    thisArg?: ThisParameterType<F>,
    ...args: A
  ): ReturnType<F> {
    return this.storage.run(ctx, () => fn.apply(thisArg, args));
  }
  bind<T>(_ctx: Context, target: T): T {
    return target;
  }
  enable(): this {
    return this;
  }
  disable(): this {
    this.storage.disable();
    return this;
  }
}
