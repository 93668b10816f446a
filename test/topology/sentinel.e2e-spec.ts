/**
 * Sentinel: 1 primary + 1 replica + 3 sentinels from real `redis-server` processes.
 * Locks through ioredis' Sentinel options, the `WAIT`-based replica acknowledgement (granted only
 * when a replica has the lock, rolled back otherwise), and the primary killed while locks are
 * held: after the promotion everyone locks again, waiters recover, and a grant the replica never
 * received is reported lost.
 */
import { Logger } from '@nestjs/common';
import {
  LockLostError,
  LockService,
  RedisUnavailableError,
  type LockHandle,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { lockServices, redisKeyOf } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';
import {
  nodeCommand,
  startSentinelTopology,
  waitForReplication,
  type SentinelTopology,
} from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('sentinel');
let topology: SentinelTopology;
const services = lockServices({ prefix });

/** A LockService connected through the sentinels: what one app instance would own. */
const sentinelService = (options: RedisLockModuleOptions = {}): LockService =>
  services.create({ redis: topology.redisOptions(), ...options });

/** A promise's outcome, so a rejection awaited later in another test is never unhandled. */
interface Settled<T> {
  value?: T;
  error?: unknown;
}
const settle = <T>(promise: Promise<T>): Promise<Settled<T>> =>
  promise.then(
    (value) => ({ value }),
    (error: unknown) => ({ error }),
  );
const unwrap = <T>({ value, error }: Settled<T>): T => {
  if (error !== undefined) throw error;
  return value!;
};

const valueOn = (port: number, key: string): Promise<unknown> =>
  nodeCommand(port, 'GET', redisKeyOf(prefix, key));

beforeAll(async () => {
  // The failover makes the library log retries and the loss on purpose.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  topology = await startSentinelTopology({ sentinels: 3, quorum: 2, downAfter: 1_000 });
}, 60_000);

afterAll(async () => {
  await services.closeAll();
  await topology?.stop();
  jest.restoreAllMocks();
});

describe('Sentinel: 1 primary + 1 replica + 3 sentinels', () => {
  it('locks on the primary the sentinels name, and the lock replicates', async () => {
    const locks = sentinelService();
    expect(await topology.primaryPort()).toBe(topology.primary.port);
    const lock = await locks.acquire('basic');
    expect(await valueOn(topology.primary.port, 'basic')).toBe(lock.token);
    await waitForReplication(topology.primary.port, topology.replica.port);
    expect(await valueOn(topology.replica.port, 'basic')).toBe(lock.token);
    expect(await lock.release()).toBe(true);
  });

  it('elects one leader of a role through the sentinels, and hands over on resignation', async () => {
    const handles = [sentinelService({ ttl: 10_000 }), sentinelService({ ttl: 10_000 })].map(
      (locks) => locks.lead('sentinel-role'),
    );
    await waitFor(() => handles.filter((handle) => handle.isLeader).length === 1, 5_000);
    const leader = handles.find((handle) => handle.isLeader)!;
    const follower = handles.find((handle) => handle !== leader)!;
    const term = leader.term;
    const resigned = now();
    await leader.resign();
    // Well under the 10 s lease: the release message woke the follower.
    await waitFor(() => follower.isLeader, 2_000, 2);
    expect(now() - resigned).toBeLessThan(1_000);
    expect(follower.term).toBeGreaterThan(term);
    expect(handles.filter((handle) => handle.isLeader)).toEqual([follower]);
    await follower.resign();
  });

  describe('replicaAck (WAIT)', () => {
    it('grants a lock once a replica acknowledged it', async () => {
      const locks = sentinelService({ replicaAck: { minReplicas: 1, timeout: 1_000 } });
      const lock = await locks.acquire('ack:ok');
      // WAIT returned, so the replica has it already: no polling needed.
      expect(await valueOn(topology.replica.port, 'ack:ok')).toBe(lock.token);
      expect(await lock.release()).toBe(true);
    });

    it('fails with RedisUnavailableError and leaves no lock when the replica does not answer', async () => {
      const locks = sentinelService({ replicaAck: { minReplicas: 1, timeout: 300 } });
      topology.replica.pause();
      try {
        await expect(locks.acquire('ack:paused')).rejects.toBeInstanceOf(RedisUnavailableError);
        await expect(locks.tryAcquire('ack:paused')).rejects.toBeInstanceOf(RedisUnavailableError);
        expect(await valueOn(topology.primary.port, 'ack:paused')).toBeNull();
      } finally {
        topology.replica.resume();
      }
      // Once the replica is back, the same key can be locked.
      const lock = await locks.acquire('ack:paused');
      expect(await lock.release()).toBe(true);
    });

    it('fails and leaves no lock when fewer replicas exist than minReplicas', async () => {
      const locks = sentinelService({ replicaAck: { minReplicas: 2, timeout: 200 } });
      await expect(locks.acquire('ack:absent')).rejects.toBeInstanceOf(RedisUnavailableError);
      expect(await valueOn(topology.primary.port, 'ack:absent')).toBeNull();
      expect(await locks.isLocked('ack:absent')).toBe(false);
    });
  });

  describe('when the primary dies while locks are held', () => {
    let holder: LockService;
    let waiter: LockService;
    let kept: LockHandle;
    let lost: LockHandle;
    let keptWaiter: Promise<Settled<LockHandle>>;
    let lostWaiter: Promise<Settled<LockHandle>>;
    let impatientWaiter: Promise<Settled<LockHandle>>;
    const lostEvents: string[] = [];

    beforeAll(async () => {
      const { primary, replica } = topology;
      holder = sentinelService();
      waiter = sentinelService();
      holder.on('lost', (_error, lock) => lostEvents.push(lock.key));

      // `kept` reaches the replica before the crash; `lost` is granted while the replica is cut
      // off (paused, and its replication link dropped, so not even a socket buffer holds it).
      kept = await holder.acquire('failover:kept', { ttl: 10_000 });
      await holder.acquire('failover:expiring', { ttl: 600, renew: false });
      await waitForReplication(primary.port, replica.port);
      replica.pause();
      await nodeCommand(primary.port, 'CLIENT', 'KILL', 'TYPE', 'replica');
      lost = await holder.acquire('failover:lost', { ttl: 4_000 });
      expect(await valueOn(primary.port, 'failover:lost')).toBe(lost.token);

      keptWaiter = settle(waiter.acquire('failover:kept', { wait: 30_000 }));
      lostWaiter = settle(waiter.acquire('failover:lost', { wait: 30_000 }));
      // Retries once `expiring` ends (~600 ms), i.e. while no primary answers; its budget
      // outlasts the failover by far. (A short commandTimeout makes that retry fail for sure.)
      impatientWaiter = settle(
        sentinelService({ commandTimeout: 500 }).acquire('failover:expiring', { wait: 30_000 }),
      );
      await sleep(100);

      await primary.kill();
      replica.resume();
      await topology.waitForPrimary(replica);
    }, 30_000);

    it('reports the grant the replica never received: signal, event and release() false', async () => {
      await waitFor(() => lost.signal.aborted, 15_000);
      expect(lost.signal.reason).toBeInstanceOf(LockLostError);
      expect(lostEvents).toContain('failover:lost');
      expect(lostEvents).not.toContain('failover:kept');
      expect(await lost.release()).toBe(false);
    });

    it('lets the lost lock’s waiter take it on the new primary, with a higher fence', async () => {
      const successor = unwrap(await lostWaiter);
      expect(await valueOn(topology.replica.port, 'failover:lost')).toBe(successor.token);
      // The counter was lost with the grant; a new counter starts from Redis' clock in µs, above
      // every fence handed out before. (A counter the replica has in an older state can repeat.)
      expect(successor.fence).toBeGreaterThan(lost.fence);
      await successor.release();
    });

    it('keeps the replicated lock: renewable, released, and its waiter is woken at once', async () => {
      expect(kept.signal.aborted).toBe(false);
      await kept.extend(10_000);
      const released = now();
      expect(await kept.release()).toBe(true);
      const next = unwrap(await keptWaiter);
      // Re-subscribed on the new primary: woken by the release, not by its 10 s fallback.
      expect(now() - released).toBeLessThan(1_000);
      await next.release();
    });

    it('keeps a waiter whose retry fell into the failover waiting within its budget', async () => {
      // Budget 30 s, failover ~3 s: the lock must be granted, not RedisUnavailableError.
      const outcome = await impatientWaiter;
      expect(outcome.error).toBeUndefined();
      await outcome.value?.release();
    });

    it('lets every client lock again, old or new (no "only the old holder can lock" bug)', async () => {
      for (const client of [holder, waiter, sentinelService(), sentinelService()]) {
        const lock = await client.tryAcquire('failover:after');
        expect(lock).not.toBeNull();
        expect(await valueOn(topology.replica.port, 'failover:after')).toBe(lock!.token);
        expect(await lock!.release()).toBe(true);
      }
    });
  });
});
