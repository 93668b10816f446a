import { readHolderLua } from './holder.lua';
import { LuaScript } from './lua-script';
import { nowMsLua } from './permit.lua';
import type { PublishCommand } from './lua-script';
import { heldSharesLua } from './share-holders.lua';
import { unmarkedLua } from './waited.lua';

/**
 * Administrative removal of every holder of every kind of lock on one key, whoever holds it, in
 * one atomic step (the keys share the hash tag): the exclusive lock, a read lock's readers, the
 * semaphore's permits — each with its holder records. Fence counters stay, so fences keep
 * increasing; queues stay, so fair waiters keep their order. Every holder learns of it at its
 * next renewal (its signal aborts). Waiters wake as a release would wake them: '1' for the lock,
 * a wake-all for the readers' (a writer waiting for them, readers queued behind it), one '1' per
 * permit removed — all on the lock's one channel, which every kind's waiters listen on. A
 * semaphore's limit and holder records go with its permits.
 * Keys: the lock (a writer's string, or the readers' or the permits' sorted set), its fence
 * counter, its holder record, the readers' holder records; the permits' limit, their fence
 * counter, their holder records.
 * Args: the publish command, the lock's release channel (no KEY: see release.script).
 * Returns {1 when the lock was deleted else 0, fence counter, "<since> <instance id>" of its
 * holder or false, readers removed, permits removed, permit fence counter}: readers and permits
 * as flat lists of ms left and holder record (false when none), as inspectScript reads them.
 */
export const forceReleaseScript = new LuaScript<
  readonly [
    lockKey: string,
    fenceKey: string,
    holderKey: string,
    readerHoldersKey: string,
    limitKey: string,
    permitFenceKey: string,
    permitHoldersKey: string,
  ],
  readonly [publish: PublishCommand, channel: string],
  [
    deleted: 0 | 1,
    fence: number,
    holder: string | null,
    readers: (number | string | null)[],
    permits: (number | string | null)[],
    permitFence: number,
  ]
>(
  'force-release',
  `
local lockKey, fenceKey, holderKey, readerHoldersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local limitKey, permitFenceKey, permitHoldersKey = KEYS[5], KEYS[6], KEYS[7]
local publish, channel = ARGV[1], ARGV[2]
${nowMsLua}
local token = redis.pcall('GET', lockKey)
if type(token) ~= 'string' then token = false else token = ${unmarkedLua('token')} end
${readHolderLua('holderKey', 'token')}
-- What is removed, read first: the live readers or permits (their limit says which), with
-- their records.
${heldSharesLua('lockKey', 'limitKey', 'readerHoldersKey', 'permitHoldersKey')}local deleted = 0
if lockType == 'permits' then
  -- The permits' set (its lapsed permits too); one wake-up per permit removed.
  redis.call('DEL', lockKey)
  for _ = 1, #permits / 2 do redis.call(publish, channel, '1') end
elseif lockType == 'zset' then
  -- The readers' set (its lapsed shares too).
  redis.call('DEL', lockKey)
  if #readers > 0 then redis.call(publish, channel, 'wake-all:force-release') end
elseif redis.call('DEL', lockKey) == 1 then
  deleted = 1
  redis.call('DEL', holderKey)
  redis.call(publish, channel, '1')
end
redis.call('DEL', readerHoldersKey, limitKey, permitHoldersKey)
return {
  deleted,
  tonumber(redis.pcall('GET', fenceKey)) or 0,
  holder,
  readers,
  permits,
  tonumber(redis.pcall('GET', permitFenceKey)) or 0,
}
`,
);
