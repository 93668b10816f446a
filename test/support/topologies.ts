import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import Redis, { type RedisOptions } from 'ioredis';
import { freePort } from './free-port';
import { startLinkProxy, type LinkProxy } from './link-proxy';
import {
  defaultRedisServerBin,
  redisServerVersion,
  startRedis,
  type RedisServer,
} from './redis-server';
import { sleep, waitFor } from './time';

/**
 * Multi-process Redis topologies for the scale-out suites: a Redis Cluster (primaries + replicas),
 * a Sentinel-managed primary/replica pair, and N independent primaries for Redlock. Every process
 * listens on 127.0.0.1 only, keeps its files in one temp dir, and is cleaned up by pid (`stop()` in
 * `afterAll`; survivors of a crashed run are SIGKILLed by tracked-pids when jest exits).
 */

const HOST = '127.0.0.1';

/** Host and port of one node, as ioredis takes them. */
export interface HostPort {
  host: string;
  port: number;
}

/** Runs one command on 127.0.0.1:`port` over a throwaway connection (no retries, no queueing). */
export async function nodeCommand(port: number, ...args: (string | number)[]): Promise<unknown> {
  const client = new Redis({
    host: HOST,
    port,
    lazyConnect: true,
    connectTimeout: 1_000,
    commandTimeout: 2_000,
    maxRetriesPerRequest: 0,
    enableOfflineQueue: false,
    retryStrategy: () => null,
  });
  client.on('error', () => undefined);
  try {
    await client.connect();
    const [name, ...rest] = args;
    return await client.call(String(name), ...rest);
  } finally {
    client.disconnect();
  }
}

/** `nodeCommand`, but undefined instead of an error (for polling nodes that may be down). */
async function tryNodeCommand(port: number, ...args: (string | number)[]): Promise<unknown> {
  return nodeCommand(port, ...args).catch(() => undefined);
}

/**
 * A plain client to one node (no cluster redirects, so a read shows what THAT node holds), for
 * assertions. `disconnect()` it when done.
 */
export function nodeClient(port: number): Redis {
  const client = new Redis({ host: HOST, port, maxRetriesPerRequest: 1 });
  client.on('error', () => undefined);
  return client;
}

/** Resolves once the replica on `replicaPort` applied everything its primary wrote so far. */
export async function waitForReplication(
  primaryPort: number,
  replicaPort: number,
  timeout = 5_000,
): Promise<void> {
  const offset = async (port: number, field: string): Promise<number> =>
    Number(parseInfo(String(await tryNodeCommand(port, 'INFO', 'replication')))[field]);
  const target = await offset(primaryPort, 'master_repl_offset');
  await waitFor(
    async () => (await offset(replicaPort, 'slave_repl_offset')) >= target,
    timeout,
    10,
  );
}

/** Parses `INFO`-style `field:value` lines. */
export function parseInfo(text: string): Record<string, string> {
  const fields: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const at = line.indexOf(':');
    if (at > 0 && !line.startsWith('#')) fields[line.slice(0, at)] = line.slice(at + 1);
  }
  return fields;
}

/** Ports handed out in this jest process, so two nodes never get the same "free" port. */
const usedPorts = new Set<number>();

async function uniqueFreePort(): Promise<number> {
  for (;;) {
    const port = await freePort();
    if (!usedPorts.has(port)) {
      usedPorts.add(port);
      return port;
    }
  }
}

/** Whether 127.0.0.1:`port` can be listened on right now. */
function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, HOST, () => server.close(() => resolve(true)));
  });
}

/**
 * A node's client port and cluster bus port. Redis < 7 has no `cluster-port` directive and always
 * listens for the bus on port + 10000, so that port must be free (and exist) too.
 */
async function clusterNodePorts(fixedBusOffset: boolean): Promise<[number, number]> {
  for (let tries = 0; tries < 200; tries++) {
    const port = await uniqueFreePort();
    if (!fixedBusOffset) return [port, await uniqueFreePort()];
    const bus = port + 10_000;
    if (bus <= 65_535 && !usedPorts.has(bus) && (await portIsFree(bus))) {
      usedPorts.add(bus);
      return [port, bus];
    }
  }
  throw new Error('No free port p with p + 10000 free for a Redis < 7 cluster node');
}

function makeTempDir(kind: string): string {
  return mkdtempSync(join(tmpdir(), `nestjs-redis-lock-${kind}-`));
}

function run(file: string, args: string[], timeout: number): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout }, (error, stdout, stderr) => {
      if (error)
        reject(new Error(`${file} ${args.join(' ')} failed: ${error.message}\n${stdout}${stderr}`));
      else resolve(stdout);
    });
  });
}

// ---------------------------------------------------------------------------------------------
// Redis Cluster
// ---------------------------------------------------------------------------------------------

/** One line of `CLUSTER NODES`. */
export interface ClusterNodeView {
  id: string;
  port: number;
  role: 'master' | 'slave';
  /** The primary's id, for a replica. */
  primaryId?: string;
  /** Flagged `fail` or `fail?` (or not connected) by the node we asked. */
  failing: boolean;
  /** Slot ranges, inclusive. */
  slots: [number, number][];
}

/** A primary with its slots and its replicas, as the cluster sees it right now. */
export interface Shard {
  primary: RedisServer;
  replicas: RedisServer[];
  slots: [number, number][];
}

export interface StartClusterOptions {
  /** @default 3 */
  primaries?: number;
  /** @default 1 */
  replicasPerPrimary?: number;
  /** `cluster-node-timeout` in ms: how soon a dead primary is failed over. @default 1000 */
  nodeTimeout?: number;
  /**
   * The `redis-server` binary of every node, or one per node in start order (the first
   * `primaries` nodes become the primaries), e.g. to start a Cluster in the middle of an upgrade.
   * @default `REDIS_SERVER_BIN`, else `redis-server` on PATH
   */
  bin?: string | readonly string[];
}

export interface RedisClusterTopology {
  /** Every node process, primaries and replicas (the roles change on failover). */
  readonly servers: RedisServer[];
  /** Startup nodes for ioredis `Cluster` / `RedisLockModule.forRoot({ cluster: { nodes } })`. */
  readonly startupNodes: HostPort[];
  /** Whether every node has sharded pub/sub (`SPUBLISH`/`SSUBSCRIBE`: Redis ≥ 7). */
  readonly shardedPubSub: boolean;
  /** The server listening on `port`. */
  server(port: number): RedisServer;
  /** `CLUSTER NODES` as seen by a live node. */
  view(): Promise<ClusterNodeView[]>;
  /** The current shards (primaries that own slots), ordered by their first slot. */
  shards(): Promise<Shard[]>;
  /** The hash slot of `key` (`CLUSTER KEYSLOT`). */
  slotOf(key: string): Promise<number>;
  /** The shard serving `key` right now. */
  shardOf(key: string): Promise<Shard>;
  /**
   * Resolves once every live node says `cluster_state:ok`, all of them agree on which primaries
   * own all 16384 slots, and every live replica of a live primary is in sync.
   */
  waitUntilHealthy(timeout?: number): Promise<void>;
  /**
   * Resolves once `replica` is a primary that owns slots in the view of every live node, and the
   * cluster is healthy again.
   */
  waitForPromotion(replica: RedisServer, timeout?: number): Promise<void>;
  /** Stops every node and deletes the temp dir. */
  stop(): Promise<void>;
}

/** Parses `CLUSTER NODES`. */
export function parseClusterNodes(text: string): ClusterNodeView[] {
  return text
    .trim()
    .split('\n')
    .filter(Boolean)
    .map((line) => {
      const [id, address, flags, primary, , , , link, ...slotFields] = line.split(' ');
      const port = Number(address!.split('@')[0]!.split(':').pop());
      const flagList = flags!.split(',');
      const slots: [number, number][] = slotFields
        .filter((field) => !field.startsWith('['))
        .map((field) => {
          const [from = NaN, to = from] = field.split('-').map(Number);
          return [from, to];
        });
      return {
        id: id!,
        port,
        role: flagList.includes('master') ? 'master' : 'slave',
        primaryId: primary === '-' ? undefined : primary,
        failing: flagList.includes('fail') || flagList.includes('fail?') || link === 'disconnected',
        slots,
      } satisfies ClusterNodeView;
    });
}

/**
 * Starts `primaries × (1 + replicasPerPrimary)` `redis-server --cluster-enabled yes` processes
 * and joins them with `redis-cli --cluster create`. `cluster-require-full-coverage no`, so a
 * failover of one shard leaves the others serving.
 */
export async function startCluster(
  options: StartClusterOptions = {},
): Promise<RedisClusterTopology> {
  const primaries = options.primaries ?? 3;
  const replicasPerPrimary = options.replicasPerPrimary ?? 1;
  const nodeTimeout = options.nodeTimeout ?? 1_000;
  const dir = makeTempDir('cluster');
  const count = primaries * (1 + replicasPerPrimary);
  const bins = Array.from({ length: count }, (_, index) =>
    typeof options.bin === 'string'
      ? options.bin
      : (options.bin?.[index] ?? defaultRedisServerBin()),
  );
  // `cluster-port` came with Redis 7.0 (as did sharded pub/sub); older servers refuse it.
  const hasClusterPort = bins.map((bin) => redisServerVersion(bin)[0]! >= 7);
  const servers: RedisServer[] = [];
  try {
    const ports = await Promise.all(hasClusterPort.map((has) => clusterNodePorts(!has)));
    await startAll(
      servers,
      ports.map(([port, busPort], index) =>
        startRedis({
          bin: bins[index],
          port,
          args: [
            ...['--dir', dir, '--cluster-enabled', 'yes'],
            ...['--cluster-config-file', join(dir, `nodes-${port}.conf`)],
            ...(hasClusterPort[index] ? ['--cluster-port', String(busPort)] : []),
            ...['--cluster-node-timeout', String(nodeTimeout)],
            ...['--cluster-require-full-coverage', 'no'],
            // Promote a replica even if it lost its link a while ago (tests pause replicas).
            ...['--cluster-replica-validity-factor', '0'],
            ...['--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'],
          ],
        }),
      ),
    );
    await run(
      'redis-cli',
      [
        '--cluster',
        'create',
        ...servers.map((server) => `${HOST}:${server.port}`),
        '--cluster-replicas',
        String(replicasPerPrimary),
        '--cluster-yes',
      ],
      30_000,
    );
  } catch (error) {
    await Promise.all(servers.map((server) => server.kill()));
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }

  const byPort = new Map(servers.map((server) => [server.port, server]));
  const server = (port: number): RedisServer => {
    const found = byPort.get(port);
    if (!found) throw new Error(`No cluster node on port ${port}`);
    return found;
  };
  const live = (): RedisServer[] => servers.filter((node) => node.running);

  const viewFrom = async (port: number): Promise<ClusterNodeView[] | undefined> => {
    const text = await tryNodeCommand(port, 'CLUSTER', 'NODES');
    return typeof text === 'string' ? parseClusterNodes(text) : undefined;
  };
  const view = async (): Promise<ClusterNodeView[]> => {
    for (const node of live()) {
      const nodes = await viewFrom(node.port);
      if (nodes) return nodes;
    }
    throw new Error('No cluster node answers CLUSTER NODES');
  };
  const shardsOf = (nodes: ClusterNodeView[]): Shard[] =>
    nodes
      .filter((node) => node.role === 'master' && node.slots.length > 0)
      .sort((a, b) => a.slots[0]![0] - b.slots[0]![0])
      .map((primary) => ({
        primary: server(primary.port),
        replicas: nodes
          .filter((node) => node.role === 'slave' && node.primaryId === primary.id)
          .map((node) => server(node.port)),
        slots: primary.slots,
      }));
  const slotOf = async (key: string): Promise<number> =>
    Number(await nodeCommand(live()[0]!.port, 'CLUSTER', 'KEYSLOT', key));
  const owns = (shard: Shard, slot: number): boolean =>
    shard.slots.some(([from, to]) => slot >= from && slot <= to);

  /** One health check: undefined when healthy, else what is still wrong. */
  const problem = async (): Promise<string | undefined> => {
    let owners: string | undefined;
    for (const node of live()) {
      const info = await tryNodeCommand(node.port, 'CLUSTER', 'INFO');
      if (typeof info !== 'string') return `${node.port} does not answer`;
      const fields = parseInfo(info);
      if (fields.cluster_state !== 'ok') return `${node.port} says ${fields.cluster_state}`;
      if (fields.cluster_slots_assigned !== '16384') return `${node.port}: slots unassigned`;
      const nodes = await viewFrom(node.port);
      if (!nodes) return `${node.port} does not answer CLUSTER NODES`;
      const masters = nodes
        .filter((entry) => entry.role === 'master' && entry.slots.length > 0)
        .map((entry) => `${entry.port}:${JSON.stringify(entry.slots)}`)
        .sort()
        .join(' ');
      if (owners !== undefined && owners !== masters) return `nodes disagree on slot owners`;
      owners = masters;
      const me = nodes.find((entry) => entry.port === node.port);
      const primary = me?.primaryId && nodes.find((entry) => entry.id === me.primaryId);
      if (me?.role === 'slave' && primary && byPort.get(primary.port)?.running) {
        const replication = parseInfo(
          String(await tryNodeCommand(node.port, 'INFO', 'replication')),
        );
        if (replication.master_link_status !== 'up') return `${node.port} is not in sync`;
      }
    }
    return undefined;
  };
  const waitUntilHealthy = async (timeout = 20_000): Promise<void> => {
    const deadline = performance.now() + timeout;
    let last: string | undefined;
    while ((last = await problem()) !== undefined) {
      if (performance.now() > deadline) throw new Error(`Cluster not healthy: ${last}`);
      await sleep(50);
    }
  };

  await waitUntilHealthy(30_000);

  return {
    servers,
    startupNodes: servers.map((node) => ({ host: HOST, port: node.port })),
    shardedPubSub: hasClusterPort.every(Boolean),
    server,
    view,
    shards: async () => shardsOf(await view()),
    slotOf,
    async shardOf(key) {
      const slot = await slotOf(key);
      const shard = shardsOf(await view()).find((candidate) => owns(candidate, slot));
      if (!shard) throw new Error(`No shard serves slot ${slot}`);
      return shard;
    },
    waitUntilHealthy,
    async waitForPromotion(replica, timeout = 20_000) {
      await waitFor(
        async () => {
          for (const node of live()) {
            const nodes = await viewFrom(node.port);
            const me = nodes?.find((entry) => entry.port === replica.port);
            if (!me || me.role !== 'master' || me.slots.length === 0) return false;
          }
          return true;
        },
        timeout,
        50,
      );
      await waitUntilHealthy(timeout);
    },
    async stop() {
      await Promise.all(servers.map((node) => node.stop()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// ---------------------------------------------------------------------------------------------
// Sentinel
// ---------------------------------------------------------------------------------------------

/** A `redis-server <conf> --sentinel` process, started and stopped by the same harness. */
export type SentinelServer = RedisServer;

export interface StartSentinelOptions {
  /** Master name the sentinels monitor. @default 'mymaster' */
  name?: string;
  /** @default 3 */
  sentinels?: number;
  /** Sentinel quorum. @default 2 */
  quorum?: number;
  /** `down-after-milliseconds`: how soon a silent primary counts as down. @default 1000 */
  downAfter?: number;
  /** The binary of every process. @default `REDIS_SERVER_BIN`, else `redis-server` on PATH */
  bin?: string;
  /**
   * Route the replica's and the sentinels' links to the primary through one `LinkProxy`
   * (`primaryLinks`), so a test can cut the primary off from them while clients, which
   * `redisOptions()` map to the primary's own port, still reach it. @default false
   */
  proxyPrimaryLinks?: boolean;
}

export interface SentinelTopology {
  readonly name: string;
  /** The primary the topology started with (a replica, or dead, after a failover). */
  readonly primary: RedisServer;
  /** The replica it started with. */
  readonly replica: RedisServer;
  readonly sentinels: SentinelServer[];
  /** Sentinel addresses, as ioredis' `sentinels` option takes them. */
  readonly sentinelNodes: HostPort[];
  /** With `proxyPrimaryLinks`: the relay the replica and the sentinels reach the primary by. */
  readonly primaryLinks?: LinkProxy;
  /** ioredis options for a Sentinel-managed connection to the current primary. */
  redisOptions(extra?: RedisOptions): RedisOptions;
  /** The primary's port according to a live sentinel. */
  primaryPort(): Promise<number>;
  /**
   * Resolves once every live sentinel names `server` as the primary and `server` says it is one
   * (`ROLE`), i.e. a failover to it completed.
   */
  waitForPrimary(server: RedisServer, timeout?: number): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Starts a primary, one replica of it, and `sentinels` sentinels monitoring them. The sentinels
 * are told about each other and about the replica in their config files (fixed `myid`s), so they
 * can vote at once instead of discovering each other over several hello periods.
 */
export async function startSentinelTopology(
  options: StartSentinelOptions = {},
): Promise<SentinelTopology> {
  const name = options.name ?? 'mymaster';
  const count = options.sentinels ?? 3;
  const quorum = options.quorum ?? 2;
  const downAfter = options.downAfter ?? 1_000;
  const dir = makeTempDir('sentinel');
  const started: { stop(): Promise<void>; kill(): Promise<void> }[] = [];
  try {
    const primary = await startRedis({
      bin: options.bin,
      port: await uniqueFreePort(),
      args: ['--dir', dir, '--repl-diskless-sync', 'yes', '--repl-diskless-sync-delay', '0'],
    });
    started.push(primary);
    const primaryLinks = options.proxyPrimaryLinks ? await startLinkProxy(primary.port) : undefined;
    if (primaryLinks)
      started.push({ stop: () => primaryLinks.close(), kill: () => primaryLinks.close() });
    // Where the replica and the sentinels find the primary; clients get its own port (natMap).
    const linkPort = primaryLinks?.port ?? primary.port;
    const own = (port: number): number => (port === linkPort ? primary.port : port);
    const natMap = primaryLinks
      ? { [`${HOST}:${linkPort}`]: { host: HOST, port: primary.port } }
      : undefined;
    const replica = await startRedis({
      bin: options.bin,
      port: await uniqueFreePort(),
      args: [
        ...['--dir', dir, '--replicaof', HOST, String(linkPort)],
        ...['--repl-diskless-load', 'on-empty-db'],
      ],
    });
    started.push(replica);
    await waitFor(
      async () =>
        parseInfo(String(await tryNodeCommand(replica.port, 'INFO', 'replication')))
          .master_link_status === 'up',
      10_000,
      20,
    );

    const ids = Array.from({ length: count }, () => randomBytes(20).toString('hex'));
    const ports = await Promise.all(ids.map(() => uniqueFreePort()));
    const starting = ports.map((port, index) => {
      const file = join(dir, `sentinel-${port}.conf`);
      const peers = ports
        .map((peerPort, peer) => ({ peerPort, peer }))
        .filter(({ peer }) => peer !== index)
        .map(
          ({ peerPort, peer }) =>
            `sentinel known-sentinel ${name} ${HOST} ${peerPort} ${ids[peer]}`,
        );
      writeFileSync(
        file,
        [
          `port ${port}`,
          `bind ${HOST}`,
          `dir ${dir}`,
          `sentinel myid ${ids[index]}`,
          `sentinel monitor ${name} ${HOST} ${linkPort} ${quorum}`,
          `sentinel down-after-milliseconds ${name} ${downAfter}`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          `sentinel known-replica ${name} ${HOST} ${replica.port}`,
          ...peers,
          '',
        ].join('\n'),
      );
      return startRedis({ bin: options.bin, port, leadingArgs: [file, '--sentinel'] });
    });
    const sentinels: RedisServer[] = [];
    try {
      await startAll(sentinels, starting);
    } finally {
      started.push(...sentinels); // stopped below if the topology fails to come up
    }

    // Ready when every sentinel sees the primary, the replica and the other sentinels.
    await waitFor(
      async () => {
        for (const sentinel of sentinels) {
          const reply = await tryNodeCommand(sentinel.port, 'SENTINEL', 'MASTER', name);
          if (!Array.isArray(reply)) return false;
          const fields: Record<string, string> = {};
          for (let i = 0; i + 1 < reply.length; i += 2) fields[reply[i]] = String(reply[i + 1]);
          if (
            fields.flags !== 'master' ||
            Number(fields['num-slaves']) < 1 ||
            Number(fields['num-other-sentinels']) < count - 1
          ) {
            return false;
          }
          const replicas = await tryNodeCommand(sentinel.port, 'SENTINEL', 'REPLICAS', name);
          const ok =
            Array.isArray(replicas) &&
            replicas.some((entry: string[]) => {
              const at = entry.indexOf('flags');
              return entry[at + 1] === 'slave' && entry.includes(String(replica.port));
            });
          if (!ok) return false;
        }
        return true;
      },
      15_000,
      50,
    );

    const sentinelNodes = sentinels.map((sentinel) => ({ host: HOST, port: sentinel.port }));
    const live = (): SentinelServer[] => sentinels.filter((sentinel) => sentinel.running);
    const masterAddress = async (sentinel: SentinelServer): Promise<number | undefined> => {
      const reply = await tryNodeCommand(
        sentinel.port,
        'SENTINEL',
        'GET-MASTER-ADDR-BY-NAME',
        name,
      );
      return Array.isArray(reply) ? own(Number(reply[1])) : undefined;
    };
    return {
      name,
      primary,
      replica,
      sentinels,
      sentinelNodes,
      primaryLinks,
      redisOptions: (extra = {}) => ({ sentinels: sentinelNodes, name, natMap, ...extra }),
      async primaryPort() {
        for (const sentinel of live()) {
          const port = await masterAddress(sentinel);
          if (port !== undefined) return port;
        }
        throw new Error('No sentinel answers');
      },
      async waitForPrimary(server, timeout = 20_000) {
        await waitFor(
          async () => {
            for (const sentinel of live()) {
              if ((await masterAddress(sentinel)) !== server.port) return false;
            }
            const role = await tryNodeCommand(server.port, 'ROLE');
            return Array.isArray(role) && role[0] === 'master';
          },
          timeout,
          50,
        );
      },
      async stop() {
        await Promise.all(started.map((process) => process.stop()));
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await Promise.all(started.map((process) => process.kill()));
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

// ---------------------------------------------------------------------------------------------
// Redlock: independent primaries
// ---------------------------------------------------------------------------------------------

/** Starts `count` independent `redis-server` primaries (no replication between them). */
export async function startIndependentPrimaries(count: number): Promise<RedisServer[]> {
  return Promise.all(
    Array.from({ length: count }, async () => startRedis({ port: await uniqueFreePort() })),
  );
}

/**
 * Waits for every start and keeps each server that started in `into`, so a caller that cleans up
 * `into` on failure stops them too: one server that fails to start (a port taken meanwhile) must
 * not leave the others running, which would keep the test process from exiting.
 */
async function startAll<T>(into: T[], starts: readonly Promise<T>[]): Promise<void> {
  const results = await Promise.allSettled(starts);
  for (const result of results) if (result.status === 'fulfilled') into.push(result.value);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
}
