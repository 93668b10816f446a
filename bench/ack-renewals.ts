/**
 * `npm run bench:ack-renewals`: acknowledged renewals (a `WAIT` after each renewal under
 * `replicaAck`) against the shipped design, in the Sentinel partition of
 * test/topology/sentinel-partition.e2e-spec.ts, in steady state, and with a stalled replica.
 * Starts its own redis-server / sentinel processes on free ports and stops them by pid.
 *
 *   node -r ./tools/ts-register.js bench/ack-renewals.ts
 *
 * Environment:
 *   ACK_BENCH_RUNS=3        runs per partition and stall cell (median and range reported)
 *   ACK_BENCH_ONLY=a,b,c    a subset of the measurements
 *   ACK_BENCH_TIMEOUT=500   replicaAck.timeout (ms) of grants and acknowledged renewals
 *
 * The results and the decision they support: docs/ack-renewals-measurement.md.
 */
import { Logger } from '@nestjs/common';
import { cpus, loadavg } from 'node:os';
import { redisServerVersion } from '../test/support/redis-server';
import { now } from '../test/support/time';
import {
  partitionRun,
  renewalLatency,
  stallRun,
  startPair,
  type PartitionRun,
  type PartitionSetting,
  type StallRun,
} from './lib/ack-renewal-scenarios';
import { MAX_LAG_S, REPLICA_ACK, VARIANTS, type Variant } from './lib/ack-renewal-variants';
import { median } from './lib/stats';

const RUNS = Number(process.env.ACK_BENCH_RUNS ?? 3);
const ONLY = new Set((process.env.ACK_BENCH_ONLY ?? 'a,b,c').split(','));

/**
 * The partition test's two cases, and two where the failover comes sooner: one with a lease
 * longer than it (the promoted replica's copy of the key holds Y off), one with a lease shorter
 * than min-replicas' bound (ttl / 3 + max lag + ~1–2 s). Variant 4 (both) only in the stall
 * measurement, for the time budget: in a partition it loses at the sooner of (2) and (3).
 */
const SETTINGS: { setting: PartitionSetting; variants: number[] }[] = [
  { setting: { ttl: 1_000, downAfter: 1_000 }, variants: [1, 2, 3] },
  { setting: { ttl: 6_000, downAfter: 6_000 }, variants: [1, 2, 3] },
  { setting: { ttl: 6_000, downAfter: 1_000 }, variants: [2, 3] },
  { setting: { ttl: 1_000, downAfter: 500 }, variants: [2, 3] },
];
const LATENCY_ROUNDS = 500;
const STALLS = [1_000, 3_000];
const STALL_LOCKS = 100;
const STALL_TTL = 1_000;

const print = (line = ''): void => void process.stdout.write(`${line}\n`);
const variant = (id: number): Variant => VARIANTS.find((v) => v.id === id)!;
const ms = (value: number): string => `${Math.round(value)}`;

/** "median (min–max)" of the defined values; "–" when none. */
function summary(values: (number | undefined)[], fmt = ms): string {
  const defined = values.filter((v): v is number => v !== undefined);
  if (defined.length === 0) return '–';
  const low = Math.min(...defined);
  const high = Math.max(...defined);
  const spread = defined.length > 1 ? ` (${fmt(low)}–${fmt(high)})` : '';
  return `${fmt(median(defined))}${spread}`;
}

/** X's loss, or "held ≥ N" when X still held when the observation ended. */
function lostCell(runs: PartitionRun[]): string {
  const held = runs.filter((run) => run.xLost === undefined);
  const lost = summary(runs.map((run) => run.xLost));
  if (held.length === 0) return lost;
  const heldFor = `held ≥ ${ms(Math.min(...held.map((run) => run.observedUntil)))} in ${held.length}/${runs.length}`;
  return held.length === runs.length ? heldFor : `${lost}; ${heldFor}`;
}

/**
 * Per run, Y's grant minus X's loss: positive, X gave the lock up that long before Y got it (the
 * safety margin); negative, both held it that long ("overlap"); X never lost it: overlap until heal.
 */
function marginCell(runs: PartitionRun[]): string {
  const cells = runs.map((run) => {
    if (run.xLost === undefined) return 'overlap until heal';
    const margin = run.yGranted - run.xLost;
    return margin >= 0 ? `+${ms(margin)}` : `overlap ${ms(-margin)}`;
  });
  return cells.join(' / ');
}

async function partitions(): Promise<void> {
  print('a) Partition: primary cut off from sentinels and replica, not from holder X');
  print(
    '   (ms from the cut; median (min–max) of runs; "held ≥ N": X still held N ms after the cut,',
  );
  print(
    '   renewing on the isolated primary until the partition heals; margin = Y granted − X lost;',
  );
  print(
    `   run i of ${RUNS} cuts at (i + 0.5) / ${RUNS} of a renewal period (ttl / 3) after X's last renewal)`,
  );
  print('| ttl / down-after | variant | promoted | Y granted | X lost | margin (per run) |');
  print('|---|---|---|---|---|---|');
  for (const { setting, variants } of SETTINGS) {
    for (const id of variants) {
      const runs: PartitionRun[] = [];
      for (let i = 0; i < RUNS; i++) {
        runs.push(await partitionRun(variant(id), setting, (i + 0.5) / RUNS));
      }
      print(
        `| ${setting.ttl / 1000} s / ${setting.downAfter / 1000} s | (${id}) ${variant(id).name} | ` +
          `${summary(runs.map((r) => r.promoted))} | ${summary(runs.map((r) => r.yGranted))} | ` +
          `${lostCell(runs)} | ${marginCell(runs)} |`,
      );
    }
  }
  print();
}

async function steadyState(): Promise<void> {
  print(
    `b) One renewal batch, replica healthy, loopback (ms; ${LATENCY_ROUNDS} batches each after 20 ` +
      'warm-up, the two designs taking turns)',
  );
  print('| locks per batch | renewal | p50 | p99 |');
  print('|---|---|---|---|');
  const pair = await startPair();
  try {
    for (const held of [1, 100]) {
      const designs = [variant(1), variant(3)];
      const latencies = await renewalLatency(pair, designs, held, LATENCY_ROUNDS);
      designs.forEach((design, i) => {
        const label = design.ackRenewals ? 'with WAIT' : 'no WAIT (shipped)';
        const { p50, p99 } = latencies[i];
        print(`| ${held} | ${label} | ${p50.toFixed(2)} | ${p99.toFixed(2)} |`);
      });
    }
  } finally {
    await pair.stop();
  }
  print();
}

async function stalls(): Promise<void> {
  print(
    `c) Replica SIGSTOPped, ${STALL_LOCKS} held locks (ttl ${STALL_TTL} ms), ` +
      `replicaAck.timeout ${REPLICA_ACK.timeout} ms, max lag ${MAX_LAG_S} s`,
  );
  print("   (locks lost of those held, per run; first loss in ms from the stall's start)");
  print('| stall | variant | lost per run | first loss |');
  print('|---|---|---|---|');
  const pair = await startPair();
  try {
    for (const stall of STALLS) {
      for (const v of VARIANTS) {
        const runs: StallRun[] = [];
        for (let i = 0; i < RUNS; i++) {
          runs.push(await stallRun(pair, v, STALL_LOCKS, STALL_TTL, stall));
        }
        const lost = runs.map((run) => `${run.lost}/${run.held}`).join(', ');
        print(
          `| ${stall / 1000} s | (${v.id}) ${v.name} | ${lost} | ${summary(runs.map((r) => r.firstLoss))} |`,
        );
      }
    }
  } finally {
    await pair.stop();
  }
  print();
}

async function main(): Promise<void> {
  // Renewals fail on purpose here; the library's warnings would bury the tables.
  Logger.overrideLogger(['error']);
  const started = now();
  print(
    `ack-renewals bench: redis-server ${redisServerVersion().join('.')}, node ${process.version}, ` +
      `${cpus().length} cores, load ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}, ${RUNS} runs per cell`,
  );
  print();
  if (ONLY.has('a')) await partitions();
  if (ONLY.has('b')) await steadyState();
  if (ONLY.has('c')) await stalls();
  print(`total ${((now() - started) / 1000).toFixed(0)} s`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
    process.exit(1);
  },
);
