import { nextFenceLua } from './fence.lua';
import { LuaScript } from './lua-script';

/**
 * Fair mode's release, also used by a waiter that leaves the queue: drops `token`'s queue entry,
 * and if `token` holds the lock, hands it straight to the first live waiter — the lock is never
 * free for a newcomer to take while someone queues. The new holder gets the short lease its entry
 * names (at most its entry's lifetime, so a waiter that died since its last refresh blocks no
 * longer than that), which it renews at once.
 * KEYS[1] lock, KEYS[2] fence counter, KEYS[3] queue, KEYS[4] waiters.
 * ARGV[1] token, ARGV[2] 'PUBLISH' or 'SPUBLISH', ARGV[3] how long (ms) the fence counter
 * outlives the lease a hand-off gives, ARGV[4] the release channel (no KEY: see release.script).
 * Publishes "grant:<token>:<fence>" for a hand-off, else the releasing token.
 * Returns 1 when `token` held the lock (released or handed over), 0 otherwise.
 */
export const fairReleaseScript = new LuaScript(
  'fair-release',
  `
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
while true do
  local head = redis.call('ZRANGE', KEYS[3], 0, 0)[1]
  if not head then break end
  local entry = redis.call('HGET', KEYS[4], head)
  redis.call('ZREM', KEYS[3], head)
  redis.call('HDEL', KEYS[4], head)
  local expiresAt, lease = string.match(entry or '', '^(%d+) (%d+)$')
  expiresAt = tonumber(expiresAt) or 0
  if expiresAt > now then
    -- No longer than the entry would have lived: a waiter that died just after its last refresh
    -- holds the queue up for one entry lifetime in all, not two. (It counts its lease from a
    -- try sent before that refresh ran, so its own deadline is still within this one.)
    local handoff = math.max(1, math.min(tonumber(lease), expiresAt - now))
    redis.call('SET', KEYS[1], head, 'PX', handoff)
${nextFenceLua('KEYS[2]', 'handoff + tonumber(ARGV[3])')}
    redis.call(ARGV[2], ARGV[4], 'grant:' .. head .. ':' .. string.format('%d', fence))
    return 1
  end
end
redis.call(ARGV[2], ARGV[4], ARGV[1])
return 1
`,
);
