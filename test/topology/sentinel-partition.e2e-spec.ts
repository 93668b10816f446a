/**
 * Sentinel, a partial partition: the primary is cut off from the sentinels and from its replica
 * (their links run through a relay that the test blackholes) but not from the holder X, whose
 * connection goes straight to it. The sentinels promote the replica and a new client Y takes the
 * same key there. How long X goes on believing it holds the lock, without and with the primary's
 * `min-replicas-to-write` / `min-replicas-max-lag`.
 */
import { Logger } from '@nestjs/common';
import { LockLostError, LockService, type LockHandle } from 'nestjs-redis-lock';
import { lockServices } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';
import {
  nodeCommand,
  startSentinelTopology,
  waitForReplication,
  type SentinelTopology,
} from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('sentinel-partition');
const services = lockServices({ prefix });
const TTL = 1_000;
const MAX_LAG_S = 1;

beforeAll(() => {
  // Renewals fail on purpose while the primary is isolated.
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
});

afterAll(() => jest.restoreAllMocks());

/** What one partition run saw, in ms from the moment the primary was cut off. */
interface Run {
  x: LockHandle;
  /** Y's lock on the promoted replica. */
  y: LockHandle;
  /** The sentinels named the replica as the primary. */
  promoted: number;
  /** Y was granted the key on the new primary. */
  yGranted: number;
  /** X's signal aborted, or undefined while X still believes it holds the lock. */
  xLost?: number;
}

/**
 * Holder X locks through the sentinels, the primary is partitioned from the sentinels and the
 * replica, and Y locks the same key once the replica is promoted.
 */
async function partition(topology: SentinelTopology, ttl: number): Promise<Run> {
  const x = await services.create({ redis: topology.redisOptions() }).acquire('split', { ttl });
  await waitForReplication(topology.primary.port, topology.replica.port);
  const start = now();
  let xLost: number | undefined;
  x.signal.addEventListener('abort', () => (xLost = now() - start));
  topology.primaryLinks!.blackhole();
  await topology.waitForPrimary(topology.replica);
  const promoted = now() - start;
  const y: LockService = services.create({ redis: topology.redisOptions() });
  const granted = await y.acquire('split', { ttl: 10_000, wait: 15_000 });
  const yGranted = now() - start;
  expect(await nodeCommand(topology.replica.port, 'GET', `${prefix}{split}`)).toBe(granted.token);
  return {
    x,
    y: granted,
    promoted,
    yGranted,
    get xLost() {
      return xLost;
    },
  };
}

/** Prints the numbers docs/deployment.md quotes, so a reader can compare runs. */
function report(label: string, run: Run): void {
  process.stdout.write(
    `${label}: promoted ${Math.round(run.promoted)} ms, Y granted ${Math.round(run.yGranted)} ms, ` +
      `X lost ${run.xLost === undefined ? 'not yet' : `${Math.round(run.xLost)} ms`}\n`,
  );
}

describe('Sentinel, primary partitioned from sentinels and replica, not from its holder', () => {
  let topology: SentinelTopology;
  beforeAll(async () => {
    topology = await startSentinelTopology({ proxyPrimaryLinks: true, downAfter: 1_000 });
  }, 60_000);
  afterAll(async () => {
    await services.closeAll();
    await topology?.stop();
  });

  it('without min-replicas-to-write: the old holder keeps renewing for the whole partition', async () => {
    const run = await partition(topology, TTL);
    // Both hold the key: X's renewals still succeed on the isolated primary.
    await sleep(2 * TTL);
    expect(run.x.signal.aborted).toBe(false);
    expect(run.x.isHeld).toBe(true);
    report('no min-replicas', run);
    topology.primaryLinks!.heal();
    // After the heal the sentinels turn the old primary into a replica: X learns then.
    await waitFor(() => run.x.signal.aborted, 30_000, 20);
    report('no min-replicas, after heal', run);
    expect(await run.y.release()).toBe(true);
  }, 60_000);
});

describe('Sentinel, the same partition with min-replicas-to-write 1 and min-replicas-max-lag 1', () => {
  let topology: SentinelTopology;
  /** A lease long enough to tell the first refused renewal (every ttl / 3) from the deadline. */
  const ttl = 6_000;
  /**
   * Longer than the old holder can go on renewing: a renewal period (ttl / 3) + max lag + ~2 s
   * (replicas acknowledge, and the primary counts them, once a second), with room for a loaded box.
   */
  const downAfter = 6_000;
  beforeAll(async () => {
    topology = await startSentinelTopology({ proxyPrimaryLinks: true, downAfter });
    // On the primary only: promoted, the lone replica has no replica of its own to count, and
    // would refuse every write (with more replicas, configure every node alike).
    const { port } = topology.primary;
    await nodeCommand(port, 'CONFIG', 'SET', 'min-replicas-to-write', 1);
    await nodeCommand(port, 'CONFIG', 'SET', 'min-replicas-max-lag', MAX_LAG_S);
    // The primary counts its good replicas once a second: writable again once it has.
    await waitFor(
      () =>
        nodeCommand(port, 'SET', `${prefix}probe`, 1).then(
          () => true,
          () => false,
        ),
      5_000,
      50,
    );
  }, 60_000);
  afterAll(async () => {
    await services.closeAll();
    await topology?.stop();
  });

  it('the old holder loses its lock at the first renewal the isolated primary refuses, before the promotion', async () => {
    const run = await partition(topology, ttl);
    // The isolated primary refuses writes (NOREPLICAS) once its replica's acknowledgements are
    // older than the max lag (they arrive, and are counted, once a second): X's next renewal
    // meets that and gives the lock up, without waiting for its local deadline.
    await waitFor(() => run.x.signal.aborted, ttl + downAfter, 20);
    report('min-replicas', run);
    expect(run.x.signal.reason).toBeInstanceOf(LockLostError);
    expect((run.x.signal.reason as LockLostError).reason).toBe('no-replicas');
    // The cut came right after the grant: two renewal periods at most, far from the deadline.
    expect(run.xLost!).toBeLessThan(ttl * 0.9);
    // Sentinel's down-after outlasts that: the old holder had given the lock up before Y got it.
    expect(run.xLost!).toBeLessThan(run.promoted);
    expect(run.xLost!).toBeLessThan(run.yGranted);
    topology.primaryLinks!.heal();
    expect(await run.y.release()).toBe(true);
  }, 60_000);
});
