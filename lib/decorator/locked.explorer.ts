import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { messages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import type { LockSource } from '../locking/lock-source';
import { isInternalLockSource, lockSourceFor } from '../locking/public-lock-source';
import { leaseKindOf } from '../options/permits-option';
import { readWriteRequest } from '../options/read-write-options';
import { LockService } from '../service/lock.service';
import { warnIfEventsDrop } from '../transports/messages/event-handlers';
import { bindFactoryResults } from './factory-binding';
import { assertLockableResolver } from './graphql/locked-resolver';
import { bindLockSource, injectedLockSource, LOCK_SOURCE } from './locked-binding';
import { LockedInterceptor } from './locked.interceptor';
import { assertProviderPlaceholders, getLockedSpec, type LockedSpec } from './locked-spec';
import { providerSeenBy } from './module-lock-source';
import { assertRoutePlaceholders } from './route-key-plan';
import { isResolverMethod } from './route-parameters';
import { NestMetadata, type InstanceWrapper } from '../nest-internals';

/**
 * At bootstrap (as @nestjs/schedule's explorer does), finds every provider and controller with
 * `@Locked` methods whose module sees this module's LockService, and validates key templates —
 * against a provider method's parameters, or, for controller and gateway handlers, against the
 * parameters Nest fills and the route's path, fixing where each placeholder is read — so a typo
 * or an ambiguous name stops the app from starting. So does a class whose module sees no
 * LockService. Nest itself gives each instance its LockService (property injection), in every
 * scope; the explorer only binds the instances Nest does not construct (factories, values).
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

  async onModuleInit(): Promise<void> {
    try {
      for (const wrapper of this.discovery.getControllers()) this.explore(wrapper, true);
      for (const wrapper of this.discovery.getProviders()) {
        bindFactoryResults(wrapper);
        this.explore(wrapper, false);
      }
    } catch (error) {
      // Nest runs no shutdown hook after a failed init (an application context's close() only
      // re-throws it): close what the module opened, or ioredis' reconnects keep the process alive.
      if (isInternalLockSource(this.locks)) await this.locks.close();
      throw error;
    }
  }

  private explore(wrapper: InstanceWrapper, isController: boolean): void {
    const instance: unknown = wrapper.instance;
    const prototype =
      instance && typeof instance === 'object'
        ? Object.getPrototypeOf(instance)
        : wrapper.metatype?.prototype;
    if (!prototype) return;
    const locked = this.scanner
      .getAllMethodNames(prototype)
      .map((name) => ({ method: prototype[name] as unknown, spec: getLockedSpec(prototype[name]) }))
      .filter((found): found is { method: object; spec: LockedSpec } => found.spec !== undefined);
    const [first] = locked;
    if (!first) return;
    // With several RedisLockModules (scoped ones), each explorer takes the classes that lock
    // through its own service, so each is checked once, with its own module defaults.
    const locks = this.lockSourceOf(wrapper, instance, first.spec);
    if (locks !== lockSourceFor(this.locks)) return;

    const gateway = wrapper.metatype
      ? Reflect.hasMetadata(NestMetadata.gateway, wrapper.metatype)
      : false;
    for (const { method, spec } of locked) {
      // A GraphQL resolver is keyed from what Nest binds to its parameters (`@Args`), like a route.
      const resolver = isResolverMethod(method);
      if (resolver) assertLockableResolver(spec, method);
      // A gateway's message handler is keyed from its message, like a route: not a provider method.
      const wsHandler = gateway && Reflect.hasMetadata(NestMetadata.messageMapping, method);
      if (!isController && !wsHandler && !resolver) {
        assertProviderPlaceholders(spec);
      }
      if (isController || gateway || resolver) {
        // Each placeholder's one source is decided now: a typo or an ambiguous name stops the start.
        assertRoutePlaceholders(spec, wrapper.metatype ?? prototype.constructor, method);
      }
      // Writer priority off in fair mode, a kind the store does not serve (permits or read locks
      // on Redlock): refused now, not at a first call. (A test double in LockService's place has
      // no such module options or store: nothing to refuse.)
      if (isInternalLockSource(this.locks)) {
        readWriteRequest(spec.options, this.locks.options);
        this.locks.engine.assertServes(leaseKindOf(spec.options));
      }
      if (Reflect.hasMetadata(NestMetadata.schedulerType, method)) warnIfTicksRunTwice(spec, locks);
      if (isController) {
        warnIfEventsDrop(
          method,
          spec.where,
          spec.options.wait ?? locks.options.wait,
          spec.options.onBusy ?? locks.options.onBusy,
        );
      }
    }
  }

  /**
   * The LockService `wrapper`'s instances lock through: the one Nest injected, else the one its
   * module sees (bound now to an instance Nest did not construct). None is a configuration error.
   */
  private lockSourceOf(wrapper: InstanceWrapper, instance: unknown, spec: LockedSpec): LockSource {
    const injected = injectedLockSource(instance);
    if (injected) return injected;
    const seen = wrapper.host && providerSeenBy(wrapper.host, LOCK_SOURCE);
    const found = seen?.instance as object | undefined;
    const locks = found ? lockSourceFor(found) : undefined;
    if (!locks) {
      const owner = wrapper.metatype?.name ?? (spec.owner as { name?: string }).name ?? 'A class';
      throw new RedisLockConfigError(messages.noLockService(owner, wrapper.host?.name ?? '?'));
    }
    // Instances of request-scoped and transient classes are created later, by Nest, injected.
    const isStatic = wrapper.isDependencyTreeStatic() && !wrapper.isTransient;
    if (isStatic && instance && typeof instance === 'object') {
      bindLockSource(instance, locks);
    }
    return locks;
  }
}

/**
 * A scheduled job that skips when busy but keeps no minimum hold runs twice in a tick when it is
 * fast: it ends before another replica's timer fires for the same tick, which then finds the key
 * free. Said once, at bootstrap.
 */
function warnIfTicksRunTwice(spec: LockedSpec, locks: LockSource): void {
  const onBusy = spec.options.onBusy ?? locks.options.onBusy;
  const minHold = spec.options.minHold ?? locks.options.minHold;
  if (onBusy === 'skip' && !(minHold > 0)) {
    new Logger('RedisLock').warn(messages.cronWithoutMinHold(spec.where));
  }
}

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
function orderLockedInterceptorLast(method: object): void {
  const list: unknown = Reflect.getOwnMetadata(NestMetadata.interceptors, method);
  if (!Array.isArray(list)) return;
  const at = list.lastIndexOf(LockedInterceptor);
  if (at === -1 || at === list.length - 1) return;
  const reordered = list.filter((interceptor) => interceptor !== LockedInterceptor);
  Reflect.defineMetadata(NestMetadata.interceptors, [...reordered, LockedInterceptor], method);
}
