/**
 * The three measurements of the acknowledged-renewals experiment, each on redis-server processes
 * of its own (free ports, stopped by pid): a Sentinel partition, the steady-state cost of one
 * renewal batch, and a replica that stalls.
 */
import {
  LockService,
  RedisUnavailableError,
  type AcquireOptions,
  type LockHandle,
} from 'nestjs-redis-lock';
import type { HeldLock } from '../../lib/engine/held-lock';
import { startRedis, type RedisServer } from '../../test/support/redis-server';
import { now, sleep, waitFor } from '../../test/support/time';
import {
  nodeCommand,
  startSentinelTopology,
  waitForReplication,
} from '../../test/support/topologies';
import { percentile } from './stats';
import { serviceFor, setMinReplicas, waitForAcks, type Variant } from './ack-renewal-variants';

const PREFIX = 'bench:ack-renewals:';

/**
 * `acquire` under `replicaAck`, tried again when the healthy replica was too slow to acknowledge
 * the grant in time (a loaded machine): the grants are set-up here, not what is measured.
 */
async function acknowledgedAcquire(
  service: LockService,
  key: string,
  options: AcquireOptions,
): Promise<LockHandle> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await service.acquire(key, options);
    } catch (error) {
      if (!(error instanceof RedisUnavailableError) || attempt === 5) throw error;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// a) The partition of test/topology/sentinel-partition.e2e-spec.ts
// ---------------------------------------------------------------------------------------------

/** The ttl / down-after pairs of the partition test. */
export interface PartitionSetting {
  ttl: number;
  downAfter: number;
}

/** One partition run, in ms from the cut. `xLost` undefined: X still held at `observedUntil`. */
export interface PartitionRun {
  promoted: number;
  yGranted: number;
  xLost?: number;
  observedUntil: number;
}

/** How long after Y's grant to keep watching X (the old holder) before calling it "still held". */
const OBSERVE_AFTER_Y = 2_000;

/**
 * Holder X locks through the sentinels; the primary is cut off from the sentinels and the replica
 * (not from X); Y locks the same key once the replica is promoted. A fresh topology per run: after
 * a failover the relay no longer stands between the primary and the others. How soon X can learn
 * depends on when its next renewal comes, so runs cut at different phases of the renewal period.
 */
export async function partitionRun(
  variant: Variant,
  setting: PartitionSetting,
  /** Where in the renewal period (0–1, from the last renewal) the cut falls. */
  phase: number,
): Promise<PartitionRun> {
  const topology = await startSentinelTopology({
    proxyPrimaryLinks: true,
    downAfter: setting.downAfter,
  });
  const services: LockService[] = [];
  try {
    const { port } = topology.primary;
    // On the primary only, as in the test: the promoted lone replica has no replica to count.
    if (variant.minReplicas) await setMinReplicas(port, true, `${PREFIX}probe`);
    await waitForAcks(port, `${PREFIX}probe`);
    const xService = serviceFor(variant, topology.redisOptions(), { prefix: PREFIX });
    services.push(xService);
    const x = await acknowledgedAcquire(xService, 'split', { ttl: setting.ttl });
    // Opens the renewal connection before the cut (an extension takes the renewal path), and
    // sets the renewal clock: the next renewals go out every ttl / 3 from here.
    const renewedAt = now();
    await x.extend(setting.ttl);
    await waitForReplication(port, topology.replica.port);
    await sleep(renewedAt + (phase * setting.ttl) / 3 - now());
    const start = now();
    let xLost: number | undefined;
    x.signal.addEventListener('abort', () => (xLost = now() - start));
    topology.primaryLinks!.blackhole();
    await topology.waitForPrimary(topology.replica);
    const promoted = now() - start;
    // Y without replicaAck: the promoted node has no replica to acknowledge its grant.
    const yService = new LockService({ redis: topology.redisOptions(), prefix: PREFIX });
    services.push(yService);
    const y = await yService.acquire('split', { ttl: 10_000, wait: 15_000 });
    const yGranted = now() - start;
    const observedUntil = yGranted + OBSERVE_AFTER_Y;
    await waitFor(() => xLost !== undefined || now() - start >= observedUntil, 30_000, 10);
    topology.primaryLinks!.heal();
    await y.release().catch(() => false);
    return { promoted, yGranted, xLost, observedUntil };
  } finally {
    await Promise.all(services.map((service) => service.close().catch(() => undefined)));
    await topology.stop();
  }
}

// ---------------------------------------------------------------------------------------------
// b) and c): a primary with one healthy replica
// ---------------------------------------------------------------------------------------------

export interface Pair {
  primary: RedisServer;
  replica: RedisServer;
  stop(): Promise<void>;
}

export async function startPair(): Promise<Pair> {
  const primary = await startRedis({
    args: ['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'],
  });
  const replica = await startRedis({
    args: ['--replicaof', '127.0.0.1', String(primary.port), '--repl-diskless-load', 'on-empty-db'],
  });
  await waitForAcks(primary.port, `${PREFIX}probe`);
  return {
    primary,
    replica,
    stop: async () => {
      await Promise.all([replica.stop(), primary.stop()]);
    },
  };
}

/** Latency (ms) of one renewal batch, as the watchdog sends it. */
export interface BatchLatency {
  p50: number;
  p99: number;
}

const WARM_UP = 20;

/**
 * b) `rounds` renewal batches of `held` locks each, for every variant given, on a healthy pair.
 * The variants take turns batch by batch, so the load of a shared machine weighs on all alike.
 */
export async function renewalLatency(
  pair: Pair,
  variants: Variant[],
  held: number,
  rounds: number,
): Promise<BatchLatency[]> {
  const services = variants.map((variant, v) =>
    serviceFor(variant, pair.primary.url, { prefix: `${PREFIX}steady:${v}:` }),
  );
  try {
    // No watchdog renewals in between: only the batches measured here touch these leases.
    const batches = await Promise.all(
      services.map(async (service) => {
        const locks = await Promise.all(
          Array.from({ length: held }, (_, i) =>
            acknowledgedAcquire(service, `k${i}`, { ttl: 60_000, renew: false }),
          ),
        );
        return locks as unknown as HeldLock[];
      }),
    );
    const samples: number[][] = variants.map(() => []);
    const waits = variants.map(() => 0);
    for (let round = 0; round < rounds + WARM_UP; round++) {
      for (let v = 0; v < variants.length; v++) {
        const before = await waitCalls(pair.primary.port);
        const sent = now();
        const answers = await services[v].engine.renewLeases(batches[v]);
        // The first rounds warm up connections and the JIT.
        if (round >= WARM_UP) samples[v].push(now() - sent);
        waits[v] += (await waitCalls(pair.primary.port)) - before;
        if (!answers.every((answer) => answer === true)) throw new Error('a renewal was refused');
      }
    }
    // The seam is in place: one WAIT per batch in the "ack" variants, none otherwise.
    variants.forEach((variant, v) => {
      const expected = variant.ackRenewals ? rounds + WARM_UP : 0;
      if (waits[v] !== expected) {
        throw new Error(`${waits[v]} WAITs for ${rounds + WARM_UP} batches (${variant.name})`);
      }
    });
    await Promise.all(batches.flat().map((lock) => lock.release()));
    return samples.map((times) => ({ p50: percentile(times, 50), p99: percentile(times, 99) }));
  } finally {
    await Promise.all(services.map((service) => service.close()));
  }
}

/** How many WAIT commands the server on `port` has run. */
async function waitCalls(port: number): Promise<number> {
  const stats = String(await nodeCommand(port, 'INFO', 'commandstats'));
  return Number(/cmdstat_wait:calls=(\d+)/.exec(stats)?.[1] ?? 0);
}

/** c) What a stalled replica did to held locks. */
export interface StallRun {
  held: number;
  /** Locks whose signal aborted by the end (stall + settle). */
  lost: number;
  /** ms from the stall's start to the first loss, if any. */
  firstLoss?: number;
}

/**
 * Holds `count` renewing locks of `ttl`, SIGSTOPs the replica for `stallMs`, resumes it, lets the
 * renewals settle, and counts the locks lost.
 */
export async function stallRun(
  pair: Pair,
  variant: Variant,
  count: number,
  ttl: number,
  stallMs: number,
): Promise<StallRun> {
  await setMinReplicas(pair.primary.port, variant.minReplicas, `${PREFIX}probe`);
  await waitForAcks(pair.primary.port, `${PREFIX}probe`);
  const service = serviceFor(variant, pair.primary.url, { prefix: `${PREFIX}stall:` });
  try {
    const locks: LockHandle[] = await Promise.all(
      Array.from({ length: count }, (_, i) => acknowledgedAcquire(service, `k${i}`, { ttl })),
    );
    // One renewal round before the stall, so every variant's renewal connection is open.
    await sleep(ttl / 2);
    await waitForReplication(pair.primary.port, pair.replica.port);
    const start = now();
    let firstLoss: number | undefined;
    for (const lock of locks) {
      lock.signal.addEventListener('abort', () => (firstLoss ??= now() - start));
    }
    pair.replica.pause();
    try {
      await sleep(stallMs);
    } finally {
      pair.replica.resume();
    }
    // Renewals blocked in WAIT, and the primary's once-a-second count of good replicas, settle.
    await sleep(ttl + 200);
    const lost = locks.filter((lock) => lock.signal.aborted).length;
    await Promise.all(locks.map((lock) => lock.release().catch(() => false)));
    return { held: count, lost, firstLoss };
  } finally {
    await service.close();
  }
}
