/**
 * On a Cluster, releases publish with the command every process subscribes with (`SPUBLISH` when
 * every node has sharded pub/sub). Which one is asked of the nodes at startup; when none answers
 * (the Cluster is unreachable as the app starts) it is asked again, with backoff, until they do —
 * also in a process that only takes and releases locks and never subscribes, whose releases must
 * still wake the waiters of processes that found sharded pub/sub.
 */
import { Logger } from '@nestjs/common';
import { LockService } from 'nestjs-redis-lock';
import { lockServices } from '../support/lock-services';
import { now, sleep, waitFor } from '../support/time';
import { startCluster, type RedisClusterTopology } from '../support/topologies';
import { uniquePrefix } from '../support/unique-prefix';

const prefix = uniquePrefix('cluster-pubsub-check');
let topology: RedisClusterTopology;
const services = lockServices({ prefix, commandTimeout: 300 });
const clusterService = (): LockService =>
  services.create({ cluster: { nodes: topology.startupNodes } });

beforeAll(async () => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
}, 60_000);

afterAll(async () => {
  await services.closeAll();
  await topology?.stop();
  jest.restoreAllMocks();
});

it('asks again until the nodes answer when none did at startup: a process that only releases then wakes sharded waiters by message', async () => {
  for (const node of topology.servers) node.pause();
  let releaser: LockService;
  try {
    releaser = clusterService(); // its startup check finds no node answering
    await sleep(800); // well past the check's 300 ms bound
  } finally {
    for (const node of topology.servers) node.resume();
  }
  await topology.waitUntilHealthy();
  const waiterSide = clusterService(); // starts with the Cluster up

  // The releaser never subscribes: only its own retries can find the mode (bounded wait).
  const publishOf = (service: LockService): string =>
    (service.engine as unknown as { backend: { publish: string } }).backend.publish;
  const expected = topology.shardedPubSub ? 'SPUBLISH' : 'PUBLISH';
  await waitFor(() => publishOf(waiterSide) === expected, 10_000);
  // Its retries back off to one every 5 s, each with 300 ms (commandTimeout) to be answered: 10 s
  // covered two at that pace, which a loaded machine's slow first answers used up (seen in a full
  // run). 20 s covers four; a check that never retries still fails.
  await waitFor(() => publishOf(releaser) === expected, 20_000);

  const ttl = 10_000;
  const held = await releaser.acquire('hand-off', { ttl });
  const waiting = waiterSide.acquire('hand-off', { wait: 2 * ttl });
  await sleep(300); // the waiter tried, subscribed, and sleeps until a message or the lease end
  const released = now();
  expect(await held.release()).toBe(true);
  const next = await waiting;
  // Woken by the release's message, long before the holder's lease would have ended.
  expect(now() - released).toBeLessThan(ttl / 2);
  expect(next.fence).toBe(held.fence + 1);
  expect(await next.release()).toBe(true);
}, 90_000);
