import { LuaScript } from './lua-script';
import { nowMsLua, prunePermitsLua } from './permit.lua';
import type { PublishCommand } from './release.script';

/**
 * Administrative removal of every permit of a semaphore, whoever holds them (each holder learns
 * of it at its next renewal); one release message per permit removed, so as many waiters wake.
 * Keys: the permits, the limit, the fence counter (read, kept). Args: the publish command, the
 * release channel; and '1' to delete, '0' only to count.
 * Returns {live permits, fence counter}.
 */
export const permitEvictScript = new LuaScript<
  readonly [permitsKey: string, limitKey: string, fenceKey: string],
  readonly [publish: PublishCommand, channel: string, remove: '0' | '1'],
  [live: number, fence: number]
>(
  'permit-evict',
  `
local permitsKey, limitKey, fenceKey = KEYS[1], KEYS[2], KEYS[3]
local publish, channel, remove = ARGV[1], ARGV[2], ARGV[3]
${nowMsLua}${prunePermitsLua('permitsKey')}
local live = redis.call('ZCARD', permitsKey)
if remove == '1' and live > 0 then
  redis.call('DEL', permitsKey, limitKey)
  for _ = 1, live do redis.call(publish, channel, '1') end
end
return { live, tonumber(redis.call('GET', fenceKey)) or 0 }
`,
);
