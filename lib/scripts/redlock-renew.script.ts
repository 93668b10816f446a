import { LuaScript } from './lua-script';

/**
 * Redlock's batch renewal on one node: compare-and-pexpire, and repair where the key is missing.
 * A node that restarted empty, or whose stale key blocked our grant and has since run out, gets our
 * key back, so a held lock returns to every reachable node instead of shrinking towards a bare
 * quorum. The caller counts only keys that were still there as votes (a re-created key proves
 * nothing about the past) and deletes the re-created ones again unless a quorum said "ours".
 * KEYS[2i-1] lock key, KEYS[2i] its fence counter. ARGV[3i-2] token, ARGV[3i-1] lease in ms,
 * ARGV[3i] the holder's fence.
 * Returns one integer per lock: 1 renewed, 2 re-created here, 0 held by another token.
 */
export const redlockRenewScript = new LuaScript(
  'redlock-renew',
  `
local replies = {}
for i = 1, #KEYS / 2 do
  local lock, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local token, lease, fence = ARGV[3 * i - 2], ARGV[3 * i - 1], ARGV[3 * i]
  -- pcall: a foreign value of another type (WRONGTYPE) counts as another holder, for this lock only.
  local value = redis.pcall('GET', lock)
  if value == token then
    replies[i] = redis.call('PEXPIRE', lock, lease)
  elseif value == false then
    redis.call('SET', lock, token, 'PX', lease)
    -- A counter this node kept, but below our fence (it missed grants): raise it, so a later grant
    -- here cannot hand out a lower fence. A lost counter restarts from the clock, above it anyway.
    local current = tonumber(redis.pcall('GET', counter))
    if current and current < tonumber(fence) then
      redis.call('SET', counter, fence, 'XX', 'KEEPTTL')
    end
    replies[i] = 2
  else
    replies[i] = 0
  end
end
return replies
`,
);
