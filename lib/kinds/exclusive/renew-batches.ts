import { renewManyScript } from './renew-many.script';
import type { RedisCommander } from '../../redis/redis-client';
import type { RenewableLease } from '../../backends/lock-backend';

/**
 * Leases per renewal command: big enough that 10,000 held locks cost 20 commands a period, small
 * enough that one command keeps Redis busy well under a millisecond.
 */
const RENEW_BATCH = 500;

/**
 * The watchdog's renewal of exclusive leases on one Redis: compare-and-pexpire of up to
 * `RENEW_BATCH` leases per command, the commands sent together. One answer per lease, in order.
 */
export async function renewInBatches(
  client: RedisCommander,
  fenceRetention: number,
  leases: readonly RenewableLease[],
): Promise<boolean[]> {
  const batches: Promise<boolean[]>[] = [];
  for (let start = 0; start < leases.length; start += RENEW_BATCH) {
    batches.push(renewBatch(client, fenceRetention, leases.slice(start, start + RENEW_BATCH)));
  }
  return (await Promise.all(batches)).flat();
}

async function renewBatch(
  client: RedisCommander,
  fenceRetention: number,
  leases: readonly RenewableLease[],
): Promise<boolean[]> {
  const keys: string[] = [];
  const args: [fenceRetentionMs: number, ...tokenAndLeaseMs: (string | number)[]] = [
    fenceRetention,
  ];
  for (const lease of leases) {
    keys.push(lease.redisKeys.lock, lease.redisKeys.fence, lease.redisKeys.holder);
    args.push(lease.token, Math.ceil(lease.lease));
  }
  const replies = await renewManyScript.run(client, keys, args);
  return replies.map((reply) => reply === 1);
}
