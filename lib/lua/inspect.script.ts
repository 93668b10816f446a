import { readHolderLua } from './holder.lua';
import { LuaScript } from './lua-script';
import { nowMsLua } from './permit.lua';
import { heldSharesLua } from './share-holders.lua';
import { unmarkedLua } from './waited.lua';

/**
 * Reads every kind of lock on one key for inspection, in one atomic step (their keys share the
 * hash tag): the exclusive lock (who holds it, how long it still runs, its fence, and in fair
 * mode who queues), a read lock's live readers and the writers waiting for them, and the
 * semaphore's live permits, limit, fence and fair queue. One kind at most holds the lock's name:
 * its type says which (a string, or a sorted set of readers — of permits when their limit is
 * beside it). Writes nothing; a foreign value of another type under a name of ours reads as "not
 * held", not an error.
 * Keys: the lock, its fence counter, its holder record, the queue, the waiters' instance ids (as
 * in fairAcquireScript); the readers' holder records, the writers waiting; the permits' limit,
 * their fence counter, their holder records, their queue, their waiters' instance ids.
 * Returns {token or false, pttl, fence counter, "<since> <instance id>" of the current grant's
 * holder record or false, waiters, readers, writers waiting, limit, permit fence counter,
 * permits, permit waiters}: the token stays inside the backend (Redlock compares it across
 * nodes), never in what `inspect` answers; waiters come first come first, as a flat list of
 * arrival (µs on Redis' clock) and instance id (false when an older version queued it); readers
 * and permits as a flat list of ms left and holder record (false when none).
 */
export const inspectScript = new LuaScript<
  readonly [
    lockKey: string,
    fenceKey: string,
    holderKey: string,
    queueKey: string,
    waiterIdsKey: string,
    readerHoldersKey: string,
    writersWaitingKey: string,
    limitKey: string,
    permitFenceKey: string,
    permitHoldersKey: string,
    permitQueueKey: string,
    permitWaiterIdsKey: string,
  ],
  readonly [],
  [
    token: string | null,
    pttl: number,
    fence: number,
    holder: string | null,
    waiters: (string | null)[],
    readers: (number | string | null)[],
    writersWaiting: number,
    limit: number,
    permitFence: number,
    permits: (number | string | null)[],
    permitWaiters: (string | null)[],
  ]
>(
  'inspect',
  `
local lockKey, fenceKey, holderKey, queueKey, waiterIdsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local readerHoldersKey, writersWaitingKey = KEYS[6], KEYS[7]
local limitKey, permitFenceKey, permitHoldersKey = KEYS[8], KEYS[9], KEYS[10]
local permitQueueKey, permitWaiterIdsKey = KEYS[11], KEYS[12]
${nowMsLua}
-- The holder's token, without the mark of a refused try (waited.lua): Redlock compares it across
-- nodes, where one may be marked and another not.
local token = redis.pcall('GET', lockKey)
if type(token) ~= 'string' then token = false else token = ${unmarkedLua('token')} end
${readHolderLua('holderKey', 'token')}
-- A fair queue, first come first: arrival (µs) and instance id of each waiter.
local function queued(queue, ids)
  local waiters = {}
  local entries = redis.pcall('ZRANGE', queue, 0, -1, 'WITHSCORES')
  if type(entries) == 'table' then
    for i = 1, #entries, 2 do
      waiters[#waiters + 1] = entries[i + 1]
      local id = redis.pcall('HGET', ids, entries[i])
      if type(id) ~= 'string' then id = false end
      waiters[#waiters + 1] = id
    end
  end
  return waiters
end
-- A reader's share lapses in the ms its lease ends; a permit lives through it. Readers and
-- permits hold the lock key itself, as a sorted set, the permits with their limit beside it: a
-- string there (a writer) reads as neither.
${heldSharesLua('lockKey', 'limitKey', 'readerHoldersKey', 'permitHoldersKey')}local writersWaiting = redis.pcall('ZCOUNT', writersWaitingKey, '(' .. string.format('%d', now), '+inf')
if type(writersWaiting) ~= 'number' then writersWaiting = 0 end
return {
  token,
  redis.call('PTTL', lockKey),
  tonumber(redis.pcall('GET', fenceKey)) or 0,
  holder,
  queued(queueKey, waiterIdsKey),
  readers,
  writersWaiting,
  lockType == 'permits' and tonumber(redis.pcall('GET', limitKey)) or 0,
  tonumber(redis.pcall('GET', permitFenceKey)) or 0,
  permits,
  queued(permitQueueKey, permitWaiterIdsKey),
}
`,
);
