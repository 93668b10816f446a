import { nextFenceLua } from '../../lua/fence.lua';
import { writeHolderLua } from '../../lua/holder.lua';
import { LuaScript } from '../../lua/lua-script';
import type { PublishCommand } from '../../lua/lua-script';
import { unmarkedLua, WAITED_MARK } from '../../lua/waited.lua';

/**
 * Fair mode's release, also used by a waiter that leaves the queue: drops `token`'s queue entry,
 * and if `token` holds the lock, hands it straight to the first live waiter — the lock is never
 * free for a newcomer to take while someone queues. The new holder gets the short lease its entry
 * names (at most its entry's lifetime, so a waiter that died since its last refresh blocks no
 * longer than that), which it renews at once.
 * Keys: the lock, its fence counter, the queue, the waiters, the holder record, the waiters'
 * instance ids (as in fairAcquireScript). A hand-off writes the new holder's record (none when
 * that waiter queued under an older version, which wrote no id).
 * Args: the token, the publish command, how long (ms) the fence counter outlives the lease a
 * hand-off gives, the release channel (no KEY: see release.script).
 * A holder's release with nobody queued costs what default mode's does, plus one existence check.
 * Publishes "grant:<token>:<fence>" for a hand-off, else the releasing token; a waiter leaving
 * the queue last while nobody holds the lock publishes "wake-all:<token>": a read-write lock's
 * readers, refused while the queue exists, may go in now (not only once the queue lapses).
 * Returns 1 when `token` held the lock (released or handed over), 0 otherwise.
 */
export const fairReleaseScript = new LuaScript<
  readonly [
    lockKey: string,
    fenceKey: string,
    queueKey: string,
    waitersKey: string,
    holderKey: string,
    waiterIdsKey: string,
  ],
  readonly [token: string, publish: PublishCommand, fenceRetentionMs: number, channel: string],
  0 | 1
>(
  'fair-release',
  `
local lockKey, fenceKey, queueKey, waitersKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local holderKey, waiterIdsKey = KEYS[5], KEYS[6]
local token, publish, fenceRetentionMs, channel = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
-- Readers may hold the key as a sorted set (a writer leaving the queue): not a holder's token.
-- A lease a refused try marked (waited.lua) is its holder's all the same.
local value = redis.pcall('GET', lockKey)
if value == token then
  -- Unmarked: nobody was refused while we held it, and no queue existed when we got it (a
  -- grant or a hand-off out of the queue starts marked), so nobody queues or waits now: default
  -- mode's compare-and-delete, nothing to hand over or wake.
  redis.call('DEL', lockKey, holderKey)
  return 1
end
local holder = false
if type(value) == 'string' then holder = ${unmarkedLua('value')} end
if holder == token and redis.call('EXISTS', queueKey) == 0 then
  -- Waited for, but nobody queues (readers, or waiters that left): wake them.
  redis.call('DEL', lockKey, holderKey)
  redis.call(publish, channel, token)
  return 1
end
local queued = redis.call('ZREM', queueKey, token)
redis.call('HDEL', waitersKey, token)
redis.call('HDEL', waiterIdsKey, token)
if holder ~= token then
  if queued == 1 and not holder and redis.call('EXISTS', queueKey) == 0 then
    redis.call(publish, channel, 'wake-all:' .. token)
  end
  return 0
end
redis.call('DEL', lockKey, holderKey)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
while true do
  local head = redis.call('ZRANGE', queueKey, 0, 0)[1]
  if not head then break end
  local entry = redis.call('HGET', waitersKey, head)
  local headId = redis.call('HGET', waiterIdsKey, head)
  redis.call('ZREM', queueKey, head)
  redis.call('HDEL', waitersKey, head)
  redis.call('HDEL', waiterIdsKey, head)
  local expiresAt, lease = string.match(entry or '', '^(%d+) (%d+)$')
  expiresAt = tonumber(expiresAt) or 0
  if expiresAt > now then
    -- No longer than the entry would have lived: a waiter that died just after its last refresh
    -- holds the queue up for one entry lifetime in all, not two. (It counts its lease from a
    -- try sent before that refresh ran, so its own deadline is still within this one.)
    local handoff = math.max(1, math.min(tonumber(lease), expiresAt - now))
    -- The new lease starts marked: its release hands over to whoever is still in line, or
    -- wakes the readers the queue held back (refused without a lease to mark).
    redis.call('SET', lockKey, '${WAITED_MARK}' .. head, 'PX', handoff)
    if headId then
${writeHolderLua('holderKey', 'head', 'headId', 'handoff')}
    end
${nextFenceLua('fenceKey', 'handoff + tonumber(fenceRetentionMs)')}
    redis.call(publish, channel, 'grant:' .. head .. ':' .. string.format('%d', fence))
    return 1
  end
end
redis.call(publish, channel, token)
return 1
`,
);
