import { LockedInterceptor } from './locked.interceptor';
import { NestMetadata } from '../nest-internals';

/**
 * Moves `LockedInterceptor` to the end of a `@Locked` method's interceptor list, so it runs last,
 * right before pipes and the handler, whatever the decorator order. Nest runs a method's
 * interceptors in the order they were added, and decorators apply bottom-up. The lock itself is
 * taken later still, when the handler is called with its piped arguments; running last keeps the
 * call's frame (which the handler's lock is matched against) from reaching other interceptors'
 * work — `@UseInterceptors(FileInterceptor('file'))` above `@Locked('upload:<body.userId>')` parses
 * the body outside it. Must run before Nest registers routes and message handlers, which read the
 * list once.
 */
export function orderLockedInterceptorLast(method: object): void {
  const list: unknown = Reflect.getOwnMetadata(NestMetadata.interceptors, method);
  if (!Array.isArray(list)) return;
  const at = list.lastIndexOf(LockedInterceptor);
  if (at === -1 || at === list.length - 1) return;
  const reordered = list.filter((interceptor) => interceptor !== LockedInterceptor);
  Reflect.defineMetadata(NestMetadata.interceptors, [...reordered, LockedInterceptor], method);
}
