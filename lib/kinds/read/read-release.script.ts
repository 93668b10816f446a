import { LuaScript } from '../../lua/lua-script';
import type { PublishCommand } from '../../lua/lua-script';

/**
 * A reader gives back its share: compare-and-remove of its token. When no live reader is left it
 * publishes on the lock's channel, so writers waiting for the readers wake at once (a release
 * that leaves other readers wakes nobody: no writer could get in yet). The message,
 * `wake-all:<token>`, wakes every waiter of the lock in each process, not one.
 * Keys: the lock (the readers' sorted set while they hold it), their holder records (the share's goes with it, the hash with the last
 * share). Args: the token, the publish command, the release channel (no KEY: see
 * release.script).
 * Returns 1 when the share was ours and live, 0 when it was gone or had lapsed.
 */
export const readReleaseScript = new LuaScript<
  readonly [lockKey: string, holdersKey: string],
  readonly [token: string, publish: PublishCommand, channel: string],
  0 | 1
>(
  'read-release',
  `
local readersKey, holdersKey = KEYS[1], KEYS[2]
local token, publish, channel = ARGV[1], ARGV[2], ARGV[3]
local clock = redis.call('TIME')
local now = clock[1] * 1000 + math.floor(clock[2] / 1000)
-- pcall: a writer may hold the key (a string) once our share lapsed — not ours, no error.
local score = redis.pcall('ZSCORE', readersKey, token)
if type(score) ~= 'string' then return 0 end
redis.call('ZREM', readersKey, token)
redis.call('HDEL', holdersKey, token)
redis.call('ZREMRANGEBYSCORE', readersKey, '-inf', now)
-- The last share gone: its records go (lapsed ones included); otherwise the next reader's grant
-- drops those of lapsed shares.
if redis.call('EXISTS', readersKey) == 0 then
  redis.call('DEL', holdersKey)
  redis.call(publish, channel, 'wake-all:' .. token)
end
if tonumber(score) <= now then return 0 end
return 1
`,
);
