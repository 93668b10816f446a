import { Cluster } from 'ioredis';
import type { LockService, RedisLockModuleOptions } from 'nestjs-redis-lock';
import { lockServices } from './lock-services';
import { startCluster, type RedisClusterTopology } from './topologies';
import { uniquePrefix } from './unique-prefix';

/**
 * A suite on a Redis Cluster of its own (3 primaries, no replicas), started in `beforeAll` and
 * stopped in `afterAll` after every LockService made by `service()`. `admin` is a plain Cluster
 * client for assertions; read `topology` and `admin` inside tests and hooks (they exist from
 * `beforeAll` on).
 */
export function onOwnCluster(name: string) {
  const prefix = uniquePrefix(name);
  const services = lockServices({ prefix });
  let topology: RedisClusterTopology | undefined;
  let admin: Cluster | undefined;
  beforeAll(async () => {
    topology = await startCluster({ primaries: 3, replicasPerPrimary: 0 });
    admin = new Cluster(topology.startupNodes);
    admin.on('error', () => undefined);
  }, 60_000);
  afterAll(async () => {
    await services.closeAll();
    admin?.disconnect();
    await topology?.stop();
  });
  const started = <T>(value: T | undefined): T => {
    if (value === undefined) throw new Error('the Cluster starts in beforeAll');
    return value;
  };
  const suite = {
    prefix,
    get topology(): RedisClusterTopology {
      return started(topology);
    },
    get admin(): Cluster {
      return started(admin);
    },
    /** A LockService on the Cluster, under the suite's prefix. */
    service: (options: RedisLockModuleOptions = {}): LockService =>
      services.create({ cluster: { nodes: suite.topology.startupNodes }, ...options }),
    /** One key per shard, `<base>:<n>`: keys whose slots three different primaries serve. */
    async keyPerShard(base: string): Promise<string[]> {
      const shards = await suite.topology.shards();
      const found = new Map<number, string>();
      for (let i = 0; found.size < shards.length; i++) {
        const key = `${base}:${i}`;
        const slot = await suite.topology.slotOf(key);
        const shard = shards.findIndex((s) => s.slots.some(([a, b]) => slot >= a && slot <= b));
        if (!found.has(shard)) found.set(shard, key);
      }
      return [...found.values()];
    },
  };
  return suite;
}
