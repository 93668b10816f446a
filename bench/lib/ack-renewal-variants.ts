/**
 * The four designs the acknowledged-renewals experiment compares, and how to build a LockService
 * for each: grants are always acknowledged (`replicaAck`); renewals are acknowledged only in the
 * "ack" variants; "min-replicas" variants set `min-replicas-to-write 1` / `min-replicas-max-lag 1`
 * on the primary.
 */
import Redis, { type RedisOptions } from 'ioredis';
import { LockService, type RedisLockModuleOptions } from 'nestjs-redis-lock';
import { nodeCommand } from '../../test/support/topologies';
import { waitFor } from '../../test/support/time';
import { installAcknowledgedRenewals } from './acknowledged-renewals';

export interface Variant {
  id: number;
  name: string;
  ackRenewals: boolean;
  minReplicas: boolean;
}

export const VARIANTS: Variant[] = [
  { id: 1, name: 'current', ackRenewals: false, minReplicas: false },
  { id: 2, name: 'current + min-replicas', ackRenewals: false, minReplicas: true },
  { id: 3, name: 'ack renewals', ackRenewals: true, minReplicas: false },
  { id: 4, name: 'ack renewals + min-replicas', ackRenewals: true, minReplicas: true },
];

/**
 * `replicaAck` of every variant: grants (and, in "ack" variants, renewals) wait this long. The
 * timeout is the knob of acknowledged renewals: the replica stall they ride out, and what they add
 * to the time a cut-off holder takes to learn (`ACK_BENCH_TIMEOUT`, default 500 ms).
 */
export const REPLICA_ACK = {
  minReplicas: 1,
  timeout: Number(process.env.ACK_BENCH_TIMEOUT ?? 500),
};
export const MAX_LAG_S = 1;

/** A LockService for `variant` on the Redis that `redis` names (a URL or Sentinel options). */
export function serviceFor(
  variant: Variant,
  redis: string | RedisOptions,
  extra: RedisLockModuleOptions = {},
): LockService {
  const service = new LockService({ redis, replicaAck: REPLICA_ACK, ...extra });
  if (variant.ackRenewals) {
    const options: RedisOptions =
      typeof redis === 'string' ? parseUrl(redis) : { ...redis, lazyConnect: true };
    const source = new Redis(options);
    source.on('error', () => undefined);
    installAcknowledgedRenewals(service, source, REPLICA_ACK);
  }
  return service;
}

function parseUrl(url: string): RedisOptions {
  const { hostname, port } = new URL(url);
  return { host: hostname, port: Number(port), lazyConnect: true };
}

/**
 * Sets (or clears) `min-replicas-to-write` / `min-replicas-max-lag` on a primary we started, and
 * waits until it takes writes (it counts its good replicas once a second).
 */
export async function setMinReplicas(port: number, on: boolean, probeKey: string): Promise<void> {
  await nodeCommand(port, 'CONFIG', 'SET', 'min-replicas-to-write', on ? 1 : 0);
  await nodeCommand(port, 'CONFIG', 'SET', 'min-replicas-max-lag', on ? MAX_LAG_S : 10);
  await waitFor(
    () =>
      nodeCommand(port, 'SET', probeKey, 1).then(
        () => true,
        () => false,
      ),
    5_000,
    50,
  );
}

/** Waits until a write on the primary is acknowledged by its replica at once (replication flows). */
export async function waitForAcks(port: number, probeKey: string): Promise<void> {
  const client = new Redis({ host: '127.0.0.1', port, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  try {
    await waitFor(
      async () => {
        await client.set(probeKey, '1');
        return Number(await client.wait(1, 200)) === 1;
      },
      10_000,
      0,
    );
  } finally {
    client.disconnect();
  }
}
