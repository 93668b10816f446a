import { readHolderLua } from './holder.lua';
import { LuaScript } from './lua-script';

/**
 * Reads one lock for inspection, in one atomic step: who holds it and how long it still runs, its
 * fence, and in fair mode who queues. Writes nothing.
 * Keys: the lock, its fence counter, its holder record, the queue, the waiters' instance ids (as
 * in fairAcquireScript).
 * Returns {token or false, pttl, fence counter, "<since> <instance id>" of the current grant's
 * holder record or false, waiters}: the token stays
 * inside the backend (Redlock compares it across nodes), never in what `inspect` answers; the
 * waiters come first come first, as a flat list of arrival (µs on Redis' clock) and instance id
 * (false when an older version queued it).
 */
export const inspectScript = new LuaScript<
  readonly [
    lockKey: string,
    fenceKey: string,
    holderKey: string,
    queueKey: string,
    waiterIdsKey: string,
  ],
  readonly [],
  [
    token: string | null,
    pttl: number,
    fence: number,
    holder: string | null,
    waiters: (string | null)[],
  ]
>(
  'inspect',
  `
local lockKey, fenceKey, holderKey, queueKey, waiterIdsKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
-- pcall: a foreign value of another type under a name of ours reads as "not held", not an error.
local token = redis.pcall('GET', lockKey)
if type(token) ~= 'string' then token = false end
${readHolderLua('holderKey', 'token')}local waiters = {}
local queued = redis.pcall('ZRANGE', queueKey, 0, -1, 'WITHSCORES')
if type(queued) == 'table' then
  for i = 1, #queued, 2 do
    waiters[#waiters + 1] = queued[i + 1]
    waiters[#waiters + 1] = redis.call('HGET', waiterIdsKey, queued[i])
  end
end
return {
  token,
  redis.call('PTTL', lockKey),
  tonumber(redis.pcall('GET', fenceKey)) or 0,
  holder,
  waiters,
}
`,
);
