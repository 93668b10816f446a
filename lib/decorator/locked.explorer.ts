import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { LockService } from '../service/lock.service';
import { warnIfEventsDrop } from '../transports/messages/event-handlers';
import { assertLockableResolver } from './graphql/locked-resolver';
import { bindLockService } from './locked-binding';
import { orderLockedInterceptorLast } from './locked-order';
import { assertProviderPlaceholders, getLockedSpec } from './locked-spec';
import { assertRoutePlaceholders } from './route-key-plan';
import { isResolverMethod } from './route-parameters';

/** `@WebSocketGateway()` and `@SubscribeMessage()` metadata (`@nestjs/websockets`, an optional peer). */
const WS_GATEWAY = 'websockets:is_gateway';
const WS_MESSAGE_HANDLER = 'websockets:message_mapping';

/**
 * At bootstrap (as @nestjs/schedule's explorer does), finds every provider and controller with
 * `@Locked` methods, binds this app's LockService to the instance, and validates key templates —
 * against a provider method's parameters, or, for controller and gateway handlers, against the
 * parameters Nest fills and the route's path, fixing where each placeholder is read — so a typo
 * or an ambiguous name stops the app from starting.
 */
@Injectable()
export class LockedExplorer implements OnModuleInit {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly locks: LockService,
  ) {
    // Here rather than in onModuleInit: Nest creates every instance before it registers routes,
    // message handlers and gateways, and it reads their interceptor lists then, once.
    for (const wrapper of [...discovery.getControllers(), ...discovery.getProviders()]) {
      const prototype = wrapper.metatype?.prototype as Record<string, unknown> | undefined;
      if (!prototype || typeof prototype !== 'object') continue;
      for (const name of scanner.getAllMethodNames(prototype)) {
        const method = prototype[name];
        if (getLockedSpec(method)) orderLockedInterceptorLast(method as object);
      }
    }
  }

  onModuleInit(): void {
    for (const wrapper of this.discovery.getControllers()) this.explore(wrapper, true);
    for (const wrapper of this.discovery.getProviders()) this.explore(wrapper, false);
  }

  private explore(wrapper: InstanceWrapper, isController: boolean): void {
    const instance: unknown = wrapper.instance;
    const prototype =
      instance && typeof instance === 'object'
        ? Object.getPrototypeOf(instance)
        : wrapper.metatype?.prototype;
    if (!prototype) return;
    const gateway = wrapper.metatype ? Reflect.hasMetadata(WS_GATEWAY, wrapper.metatype) : false;
    let bound = false;
    for (const name of this.scanner.getAllMethodNames(prototype)) {
      const spec = getLockedSpec(prototype[name]);
      if (!spec) continue;
      // A GraphQL resolver is keyed from what Nest binds to its parameters (`@Args`), like a route.
      const resolver = isResolverMethod(prototype[name]);
      if (resolver) assertLockableResolver(spec, wrapper, prototype[name]);
      // A gateway's message handler is keyed from its message, like a route: not a provider method.
      const wsHandler = gateway && Reflect.hasMetadata(WS_MESSAGE_HANDLER, prototype[name]);
      if (!isController && !wsHandler && !resolver) {
        if (!wrapper.isDependencyTreeStatic())
          throw new RedisLockConfigError(messages.requestScoped(spec.where));
        assertProviderPlaceholders(spec);
      }
      if (isController || gateway || resolver) {
        // Each placeholder's one source is decided now: a typo or an ambiguous name stops the start.
        assertRoutePlaceholders(spec, wrapper.metatype ?? prototype.constructor, prototype[name]);
      }
      if (isController) {
        warnIfEventsDrop(
          prototype[name],
          spec.where,
          spec.options.wait ?? this.locks.options.wait,
          spec.options.onBusy ?? this.locks.options.onBusy,
        );
      }
      if (!bound && instance && typeof instance === 'object') {
        bindLockService(instance, this.locks);
        bound = true;
      }
    }
  }
}
