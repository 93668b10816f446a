import { Injectable, type OnApplicationBootstrap } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { isInternalLockSource } from '../locking/public-lock-source';
import { LockService } from '../service/lock.service';
import { bindLockSource, injectedLockService } from './locked-binding';
import { whenLeaderRole } from './when-leader.decorator';

/**
 * Once the application has bootstrapped, starts this module's campaigns: the roles of the
 * `leaders` option, then those of the `@WhenLeader` methods whose instances lead through this
 * module's LockService (with the defaults). An instance Nest did not construct (a factory's) is
 * given the LockService, as `@Locked`'s explorer does.
 */
@Injectable()
export class WhenLeaderExplorer implements OnApplicationBootstrap {
  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
    private readonly locks: LockService,
  ) {}

  onApplicationBootstrap(): void {
    // A test double in place of the LockService (`overrideProvider`) campaigns for nothing.
    if (!isInternalLockSource(this.locks)) return;
    const roles = new Set<string>();
    for (const wrapper of [...this.discovery.getProviders(), ...this.discovery.getControllers()]) {
      const instance: unknown = wrapper.instance;
      if (!instance || typeof instance !== 'object') continue;
      const prototype = Object.getPrototypeOf(instance) as Record<string, unknown>;
      const found = this.scanner
        .getAllMethodNames(prototype)
        .map((name) => whenLeaderRole(prototype[name]))
        .filter((role): role is string => role !== undefined);
      if (found.length === 0) continue;
      const injected = injectedLockService(instance);
      if (injected === undefined) bindLockSource(instance, this.locks);
      else if (injected !== this.locks) continue; // another (scoped) module's service
      for (const role of found) roles.add(role);
    }
    this.locks.leaders.startAtBootstrap(roles);
  }
}
