/**
 * The experiment's only seam: renewals (and `extend()`) followed by `WAIT`, for measuring them
 * against the shipped design. Bench code, not a library feature: nothing in lib/ changes, the
 * wrapper is put in front of one LockService's backend from the outside.
 *
 * Each renewal batch runs on a connection of the acknowledged-grant pool (`AcknowledgedGrants`, the
 * same pool and `WAIT` logic grants use under `replicaAck`), then `WAIT minReplicas timeout` on
 * that connection. Fewer replicas than `minReplicas` acknowledged (or a reset between the two)
 * counts as "not renewed": the watchdog gives those locks up at once (reason `not-owner`; a product
 * feature would report a reason of its own and delete the key).
 */
import type { Redis } from 'ioredis';
import type { LockService } from 'nestjs-redis-lock';
import { AcknowledgedGrants } from '../../lib/backends/acknowledged-grants';
import type { LockBackend, RenewableLease } from '../../lib/backends/lock-backend';
import { RedisUnavailableError } from '../../lib/errors/errors';
import type { LockRedisKeys } from '../../lib/keys/lock-keys';
import { extendScript } from '../../lib/kinds/exclusive/extend.script';
import { renewManyScript } from '../../lib/kinds/exclusive/renew-many.script';
import type { ReplicaAckOptions } from '../../lib/options/redis-lock-options';

/** As the shipped backend batches renewals (`RENEW_BATCH` in redis.backend.ts). */
const RENEW_BATCH = 500;

class AcknowledgedRenewals {
  private readonly pool: AcknowledgedGrants;

  constructor(
    private readonly source: Redis,
    options: ReplicaAckOptions,
    private readonly fenceRetention: number,
  ) {
    this.pool = new AcknowledgedGrants(source, options);
  }

  async renewMany(leases: readonly RenewableLease[]): Promise<(boolean | undefined)[]> {
    const batches: Promise<boolean[]>[] = [];
    for (let start = 0; start < leases.length; start += RENEW_BATCH) {
      batches.push(this.renewBatch(leases.slice(start, start + RENEW_BATCH)));
    }
    return (await Promise.all(batches)).flat();
  }

  async extend(keys: LockRedisKeys, token: string, ms: number): Promise<boolean> {
    const [renewed] = await this.acknowledged(keys.lock, 1, (client) =>
      extendScript
        .run(client, [keys.lock, keys.fence, keys.holder], [token, ms, this.fenceRetention])
        .then((reply) => [reply]),
    );
    return renewed ?? false;
  }

  async close(timeoutMs: number): Promise<void> {
    await this.pool.close(timeoutMs);
    this.source.disconnect();
  }

  private renewBatch(leases: readonly RenewableLease[]): Promise<boolean[]> {
    const keys: string[] = [];
    const tokensAndLeases: (string | number)[] = [];
    for (const lease of leases) {
      keys.push(lease.redisKeys.lock, lease.redisKeys.fence, lease.redisKeys.holder);
      tokensAndLeases.push(lease.token, Math.ceil(lease.lease));
    }
    return this.acknowledged(leases[0].redisKeys.lock, leases.length, (client) =>
      renewManyScript.run(client, keys, [this.fenceRetention, ...tokensAndLeases]),
    );
  }

  /**
   * Runs `write` then `WAIT` on one pooled connection. Unacknowledged: every lock of the batch
   * counts as not renewed. No rollback: the write stays on the primary, as a shipped renewal does.
   */
  private async acknowledged(
    key: string,
    count: number,
    write: (client: Redis) => Promise<number[]>,
  ): Promise<boolean[]> {
    let replies: number[] = [];
    try {
      await this.pool.run(
        key,
        async (client) => {
          replies = (await write(client)).map(Number);
          // Nothing renewed (all lost already): nothing to wait for.
          return replies.some((reply) => reply === 1) ? 1 : 0;
        },
        () => Promise.resolve(),
      );
    } catch (error) {
      if (error instanceof RedisUnavailableError) return new Array<boolean>(count).fill(false);
      throw error; // the connection failed: unknown, the watchdog retries
    }
    return replies.map((reply) => reply === 1);
  }
}

/** The private field of `LockEngine` that holds its backend; the bench swaps it. */
interface EngineWithBackend {
  backend: LockBackend;
}

/**
 * Puts acknowledged renewals in front of `service`'s backend: `renewMany` and `extend` go through
 * the wrapper, everything else (grants with their own `WAIT`, releases, pub/sub) to the original.
 * `source` is a connection to the same Redis (same Sentinel options) the pool duplicates.
 */
export function installAcknowledgedRenewals(
  service: LockService,
  source: Redis,
  options: ReplicaAckOptions,
): void {
  const engine = service.engine as unknown as EngineWithBackend;
  const inner = engine.backend;
  if (typeof inner?.renewMany !== 'function') {
    throw new Error('LockEngine keeps its backend elsewhere now: update the bench seam');
  }
  const renewals = new AcknowledgedRenewals(source, options, service.options.fenceRetention);
  const closeTimeout = service.options.commandTimeout;
  engine.backend = new Proxy(inner, {
    get(target, property) {
      if (property === 'renewMany') return renewals.renewMany.bind(renewals);
      if (property === 'extend') return renewals.extend.bind(renewals);
      if (property === 'close') {
        return async () => {
          await renewals.close(closeTimeout);
          await target.close();
        };
      }
      const value: unknown = Reflect.get(target, property, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}
