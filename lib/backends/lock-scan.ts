import type { Redis } from 'ioredis';
import { escapeGlob, lockKeyPattern, lockNameOf } from '../keys/lock-keys';
import { isClusterClient, type RedisClient } from '../redis/redis-client';

/** One page of lock key names found by SCAN. */
export interface LockNamesPage {
  /**
   * Lock names of every kind (an exclusive lock's key, a read lock's readers, a semaphore's
   * permits; never a fence, queue or holder record), without ioredis' keyPrefix.
   */
  names: string[];
  /** Where the next page starts; absent when every node has been scanned to the end. */
  cursor?: string;
}

/**
 * SCANs for the locks under `prefix`, of every kind, at least `count` of them unless the scan ends first
 * (SCAN's COUNT is a hint, so a page may hold a few more). On a Cluster it scans every primary in
 * turn, in a fixed order; the cursor `"<node>:<scan cursor>"` says where it stopped. Like SCAN,
 * a lock held for the whole listing is listed (at least once); one taken or freed meanwhile may
 * be listed or not.
 */
export async function scanLockNames(
  client: RedisClient,
  prefix: string,
  cursor: string | undefined,
  count: number,
): Promise<LockNamesPage> {
  const keyPrefix = String(client.options.keyPrefix ?? '');
  // SCAN's MATCH is not prefixed by ioredis: match the full names, and strip the keyPrefix after.
  const pattern = lockKeyPattern(keyPrefix + prefix);
  const nodes = await scanNodes(client);
  let [node, scan] = parseCursor(cursor);
  const names: string[] = [];
  while (node < nodes.length && names.length < count) {
    const [next, found] = await nodes[node]!.scan(scan, 'MATCH', pattern, 'COUNT', count);
    for (const name of found) {
      const unprefixed = name.slice(keyPrefix.length);
      if (lockNameOf(unprefixed)) names.push(unprefixed);
    }
    if (next === '0') [node, scan] = [node + 1, '0'];
    else scan = next;
  }
  return node < nodes.length ? { names, cursor: `${node}:${scan}` } : { names };
}

/**
 * Bounds one SCAN page: a scan of a large keyspace takes as many pages as it needs, and each one
 * that goes unanswered fails within `commandTimeout` instead of holding the caller for good.
 */
export type PageBound = <T>(page: Promise<T>) => Promise<T>;

/**
 * The names under which 0.1.0 kept the shares of a lock beside its key, as sorted sets: a read
 * lock's readers and a semaphore's permits. This version keeps both under the lock key itself.
 */
const LEGACY_SHARE_SETS = ['}:readers', '}:permits'];

/**
 * A lock's shares in the key layout of 0.1.0 (see `LEGACY_SHARE_SETS`): the first such sorted set
 * found under `prefix` (every primary of a Cluster, SCAN to the end), or undefined. This version
 * would not see those — a writer, or another kind, would get in beside them — so the startup
 * check refuses to start while one exists. This version's own names there (`:readers:holders`,
 * `:permits:limit` and the like) end otherwise, and a key of another type is not a share set.
 */
export async function findLegacyShareSet(
  client: RedisClient,
  prefix: string,
  bound: PageBound,
): Promise<string | undefined> {
  const keyPrefix = String(client.options.keyPrefix ?? '');
  // One pass for both names (they share the ending `s`); SCAN's TYPE leaves out all but sets.
  const pattern = `${escapeGlob(keyPrefix + prefix)}{*}:*s`;
  for (const node of await scanNodes(client)) {
    let scan = '0';
    do {
      const [next, found] = await bound(
        node.scan(scan, 'MATCH', pattern, 'COUNT', 1_000, 'TYPE', 'zset'),
      );
      const legacy = found.find((name) => LEGACY_SHARE_SETS.some((end) => name.endsWith(end)));
      if (legacy !== undefined) return legacy.slice(keyPrefix.length);
      scan = next;
    } while (scan !== '0');
  }
  return undefined;
}

/** The servers to scan: the primaries of a Cluster, by address; else the one client. */
async function scanNodes(client: RedisClient): Promise<Redis[]> {
  if (!isClusterClient(client)) return [client];
  // A Cluster client knows its primaries once it has loaded the slots: any command waits for that.
  if (client.nodes('master').length === 0) await client.ping();
  const address = (redis: Redis): string => `${redis.options.host}:${redis.options.port}`;
  return client.nodes('master').sort((a, b) => address(a).localeCompare(address(b)));
}

function parseCursor(cursor: string | undefined): [node: number, scan: string] {
  const match = /^(\d+):(\d+)$/.exec(cursor ?? '0:0');
  if (!match) throw new TypeError(`Not a lock listing cursor: ${cursor}`);
  return [Number(match[1]), match[2]!];
}
