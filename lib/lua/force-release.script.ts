import { readHolderLua } from './holder.lua';
import { LuaScript } from './lua-script';
import type { PublishCommand } from './release.script';

/**
 * Administrative delete regardless of owner (the holder learns of it at its next renewal).
 * Keys: the lock key, its fence counter (read, kept), its holder record (deleted with the lock).
 * Args: the publish command, the release channel (no KEY: see release.script).
 * Returns {1, fence, "<since> <instance id>"} when a lock was deleted — what it removed, for the
 * operator — else {0}. The holder is false when the grant wrote no record (an older version).
 */
export const forceReleaseScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string, holderKey: string],
  readonly [publish: PublishCommand, channel: string],
  [deleted: 0 | 1, fence?: number, holder?: string | null]
>(
  'force-release',
  `
local lockKey, fenceKey, holderKey = KEYS[1], KEYS[2], KEYS[3]
local publish, channel = ARGV[1], ARGV[2]
local token = redis.pcall('GET', lockKey)
if type(token) ~= 'string' then token = false end
${readHolderLua('holderKey', 'token')}
if redis.call('DEL', lockKey) == 1 then
  redis.call('DEL', holderKey)
  redis.call(publish, channel, '1')
  return { 1, tonumber(redis.call('GET', fenceKey)) or 0, holder }
end
return { 0 }
`,
);
