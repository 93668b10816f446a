import { nextFenceLua } from './fence.lua';
import { LuaScript } from './lua-script';

/**
 * Fair mode's acquire: first come, first served. Waiters queue in Redis; a free lock goes to the
 * head of the queue only, and a release hands it to the head directly (`fairReleaseScript`).
 * KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue (ZSET token → arrival, Redis µs),
 * KEYS[4] waiters (HASH token → "expiresAt lease": when its entry lapses unless refreshed, and
 * the lease a hand-off gives it, min(ttl, entry lifetime) — the waiter's own figure, so it knows
 * the lease it was handed whoever releases). All in one hash slot.
 * ARGV[1] token (one per acquire call: its place in the queue), ARGV[2] lease in ms,
 * ARGV[3] '1' to queue (or stay queued) when busy, ARGV[4] waiter entry lifetime in ms,
 * ARGV[5] how long (ms) the fence counter outlives a lease it grants.
 * Returns the fence (> 0) when granted now; {fence, pttl} when the lock is already ours (handed
 * to us by a release, or this is a re-send); {-(ms until worth retrying), fence counter} when
 * busy (the counter tells the caller which hand-offs to it are already history).
 */
export const fairAcquireScript = new LuaScript(
  'fair-acquire',
  `
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- Drop waiters that stopped refreshing their entry (crashed, or left without saying so).
while true do
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not head then break end
  local entry = redis.call('HGET', KEYS[4], head)
  if entry and (tonumber(string.match(entry, '^%d+')) or 0) > now then break end
  redis.call('ZREM', KEYS[3], head)
  redis.call('HDEL', KEYS[4], head)
end
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  return { tonumber(redis.call('GET', KEYS[2])) or 0, redis.call('PTTL', KEYS[1]) }
end
local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
if not holder and (not head or head == ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[3], ARGV[1])
  redis.call('HDEL', KEYS[4], ARGV[1])
${nextFenceLua('KEYS[2]', 'tonumber(ARGV[2]) + tonumber(ARGV[5])')}
  return fence
end
local retry
if holder then
  retry = redis.call('PTTL', KEYS[1])
else
  -- Free, but reserved for the head of the queue: it takes it now, or its entry lapses.
  retry = (tonumber(string.match(redis.call('HGET', KEYS[4], head) or '', '^%d+')) or now) - now
end
if ARGV[3] == '1' then
  if not redis.call('ZSCORE', KEYS[3], ARGV[1]) then
    redis.call('ZADD', KEYS[3], t[1] * 1000000 + t[2], ARGV[1])
  end
  local lease = math.min(tonumber(ARGV[2]), tonumber(ARGV[4]))
  redis.call('HSET', KEYS[4], ARGV[1], string.format('%d %d', now + tonumber(ARGV[4]), lease))
  -- The queue outlives no waiter: it goes when the last entry would have lapsed.
  if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then
    redis.call('PEXPIRE', KEYS[3], ARGV[4])
    redis.call('PEXPIRE', KEYS[4], ARGV[4])
  end
end
if retry < 0 then retry = 0 end
return { -retry, tonumber(redis.call('GET', KEYS[2])) or 0 }
`,
);
