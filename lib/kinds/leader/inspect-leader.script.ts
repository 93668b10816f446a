import { LuaScript, type PublishCommand } from '../../lua/lua-script';
import { unmarkedLua } from '../../lua/waited.lua';

/**
 * Reads a role's leadership in one atomic step, changing nothing.
 * Keys: the role's lease and its fence counter (in one slot; the release channel is named after
 * the lease, as in release.script).
 * Args: the publish command releases use, which says how to count the channel's subscribers.
 * Returns the lease's value (the leader's token) or false, its PTTL, the fence counter (the term)
 * or false, and how many connections subscribe to the release channel (the followers waiting).
 */
export const inspectLeaderScript = new LuaScript<
  readonly [lease: string, fence: string],
  readonly [publish: PublishCommand],
  [token: string | null, pttl: number, term: string | null, followers: number]
>(
  'inspect-leader',
  `
local lease, fence = KEYS[1], KEYS[2]
local token = redis.call('GET', lease)
if token then token = ${unmarkedLua('token')} end
local pttl = redis.call('PTTL', lease)
local term = redis.call('GET', fence)
-- A release publishes on this channel: whoever subscribes to it waits to lead. Sharded releases
-- (SPUBLISH) reach the shard's subscribers only, counted by SHARDNUMSUB.
local channel = lease .. ':released'
local counted
if ARGV[1] == 'SPUBLISH' then
  counted = redis.call('PUBSUB', 'SHARDNUMSUB', channel)
else
  counted = redis.call('PUBSUB', 'NUMSUB', channel)
end
return { token, pttl, term, counted[2] }
`,
);
