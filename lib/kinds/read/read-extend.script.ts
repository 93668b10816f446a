import { LuaScript } from '../../lua/lua-script';
import { coverLua, readFenceLua } from '../../lua/read-fence.lua';

/**
 * Compare-and-pexpire of a reader's share: renews it only while it is still there and has not
 * lapsed (a lapsed share may already have let a writer in: it is dropped, and counts as lost).
 * Keys: the lock (the readers' sorted set while they hold it), the fence counter, the readers' holder records (a lapsed share's goes, and
 * they live as long as the readers). Args: the token, the new lease in ms (from now, Redis'
 * clock), how long (ms) the fence counter outlives the lease.
 * Returns 1 when renewed, 0 when the share is gone or lapsed.
 */
export const readExtendScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string, holdersKey: string],
  readonly [token: string, leaseMs: number, fenceRetentionMs: number],
  0 | 1
>(
  'read-extend',
  `
local readersKey, fenceKey, holdersKey = KEYS[1], KEYS[2], KEYS[3]
local token, leaseMs, fenceRetentionMs = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
-- pcall: a writer may hold the key (a string) once our share lapsed — not ours, no error.
local score = redis.pcall('ZSCORE', readersKey, token)
if type(score) ~= 'string' then return 0 end
if tonumber(score) <= now then
  redis.call('ZREM', readersKey, token)
  redis.call('HDEL', holdersKey, token)
  return 0
end
redis.call('ZADD', readersKey, now + leaseMs, token)
${coverLua('readersKey', 'leaseMs')}${coverLua('holdersKey', 'leaseMs')}${readFenceLua('fenceKey', 'clock', 'leaseMs + fenceRetentionMs')}
return 1
`,
);
