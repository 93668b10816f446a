import { LuaScript } from '../../lua/lua-script';
import { coverLeasesLua, notPermitsLua, nowMsLua, prunePermitsLua } from '../../lua/permit.lua';
import type { PublishCommand } from '../../lua/lua-script';
import { syncPermitHoldersLua } from '../../lua/share-holders.lua';

/**
 * Gives a permit back: removes the token, deletes the semaphore's keys with its last permit (else
 * makes them live as long as the latest lease left, so the set never outlasts its holders), and
 * publishes the token on the release channel so a waiter — of any kind — tries at once.
 * Keys: the permits, the limit, the holder records (the permit's goes with it). Args: the token,
 * the publish command, the release channel (no KEY, as in release.script).
 * Returns 1 when our live permit was removed, 0 when it had lapsed or was never there (another
 * kind's holders under the name included: not ours, left untouched).
 */
export const permitReleaseScript = new LuaScript<
  readonly [permitsKey: string, limitKey: string, holdersKey: string],
  readonly [token: string, publish: PublishCommand, channel: string],
  0 | 1
>(
  'permit-release',
  `
local permitsKey, limitKey, holdersKey = KEYS[1], KEYS[2], KEYS[3]
local token, publish, channel = ARGV[1], ARGV[2], ARGV[3]
${nowMsLua}
-- pcall: a mutex or writer may hold the name (a string) once our permit lapsed.
local ends = redis.pcall('ZSCORE', permitsKey, token)
if type(ends) ~= 'string' then
  ends = false
${notPermitsLua('permitsKey', 'limitKey')}end
redis.call('ZREM', permitsKey, token)
redis.call('HDEL', holdersKey, token)
${prunePermitsLua('permitsKey')}
if redis.call('ZCARD', permitsKey) == 0 then
  redis.call('DEL', permitsKey, limitKey, holdersKey)
else
${syncPermitHoldersLua('permitsKey', 'holdersKey')}${coverLeasesLua('permitsKey', 'limitKey', 'holdersKey')}end
-- A lapsed permit was no longer ours: its place may have been taken meanwhile.
if not ends or tonumber(ends) < now then return 0 end
redis.call(publish, channel, token)
return 1
`,
);
