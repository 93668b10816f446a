import { Cluster } from 'ioredis';
import { RedisLockConfigError } from '../errors/errors';
import { resolveOptions } from '../options/resolve-options';
import {
  ACKNOWLEDGED_REDIS,
  assertServesKind,
  assertServesOptions,
  capabilitiesFor,
  CLUSTER,
  MEMORY,
  ONE_REDIS,
  REDLOCK,
} from './store-capabilities';

const redlock = { nodes: ['redis://a:1', 'redis://b:1', 'redis://c:1'] };
const replicaAck = { minReplicas: 1, timeout: 100 };

describe('store capabilities', () => {
  it('are known from the connection options, before anything connects', () => {
    expect(capabilitiesFor(resolveOptions({}))).toBe(ONE_REDIS);
    expect(capabilitiesFor(resolveOptions({ replicaAck }))).toBe(ACKNOWLEDGED_REDIS);
    expect(capabilitiesFor(resolveOptions({ cluster: { nodes: ['redis://a:1'] } }))).toBe(CLUSTER);
    const client = new Cluster([], { lazyConnect: true });
    expect(capabilitiesFor(resolveOptions({ redis: client }))).toBe(CLUSTER);
    expect(capabilitiesFor(resolveOptions({ redlock }))).toBe(REDLOCK);
  });

  it.each([
    [REDLOCK, { fair: true }, /`fair` is "set with redlock"/],
    [ACKNOWLEDGED_REDIS, { fair: true, replicaAck }, /`fair` is "set with replicaAck"/],
    [CLUSTER, { fair: false, replicaAck }, /`replicaAck` is "set with cluster"; .*single primary/],
    [REDLOCK, { fair: false, replicaAck }, /`replicaAck` is "set with redlock"/],
  ])('refuse module options the store cannot serve (%#)', (capabilities, options, message) => {
    const check = () => assertServesOptions(capabilities, options);
    expect(check).toThrow(RedisLockConfigError);
    expect(check).toThrow(message);
  });

  it('let through what the store serves (the control)', () => {
    for (const store of [ONE_REDIS, CLUSTER, MEMORY]) {
      expect(() => assertServesOptions(store, { fair: true })).not.toThrow();
    }
    expect(() => assertServesOptions(ONE_REDIS, { fair: false, replicaAck })).not.toThrow();
  });

  it('refuse on Redlock the kinds it cannot grant, and nothing elsewhere', () => {
    const permit = { type: 'semaphore', permits: 3 } as const;
    expect(() => assertServesKind(REDLOCK, permit)).toThrow(/Semaphores \(`permits`\) need one/);
    expect(() => assertServesKind(REDLOCK, { type: 'read' })).toThrow(/Read locks/);
    expect(() => assertServesKind(REDLOCK, { type: 'exclusive' })).not.toThrow();
    expect(() => assertServesKind(REDLOCK, undefined)).not.toThrow();
    for (const store of [ONE_REDIS, ACKNOWLEDGED_REDIS, CLUSTER, MEMORY]) {
      expect(() => assertServesKind(store, permit)).not.toThrow();
      expect(() => assertServesKind(store, { type: 'read' })).not.toThrow();
    }
  });
});
