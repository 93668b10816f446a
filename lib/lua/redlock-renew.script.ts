import { LuaScript } from './lua-script';

/**
 * Redlock's batch renewal on one node: compare-and-pexpire, and repair where the key is missing.
 * A node that restarted empty, or whose stale key blocked our grant and has since run out, gets our
 * key back, so a held lock returns to every reachable node instead of shrinking towards a bare
 * quorum. The caller counts only keys that were still there as votes (a re-created key proves
 * nothing about the past) and deletes the re-created ones again unless a quorum said "ours".
 * KEYS[2i-1] lock key, KEYS[2i] its fence counter. ARGV[1] how long (ms) a fence counter outlives
 * its lease; ARGV[3i-1] token, ARGV[3i] lease in ms, ARGV[3i+1] the holder's fence.
 * Returns one integer per lock: 1 renewed, 2 re-created here, 0 held by another token.
 */
export const redlockRenewScript = new LuaScript(
  'redlock-renew',
  `
local retention = tonumber(ARGV[1])
local replies = {}
for i = 1, #KEYS / 2 do
  local lock, counter = KEYS[2 * i - 1], KEYS[2 * i]
  local token, lease, fence = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  -- The counter follows the lease, so it never expires under a held lock.
  local keep = string.format('%d', tonumber(lease) + retention)
  -- pcall: a foreign value of another type (WRONGTYPE) counts as another holder, for this lock only.
  local value = redis.pcall('GET', lock)
  if value == token then
    redis.call('PEXPIRE', counter, keep)
    replies[i] = redis.call('PEXPIRE', lock, lease)
  elseif value == false then
    redis.call('SET', lock, token, 'PX', lease)
    -- A counter below our fence (this node missed grants, or lost it): raise it, so a later grant
    -- here cannot hand out a lower fence.
    local current = tonumber(redis.pcall('GET', counter))
    if not current or current < tonumber(fence) then
      redis.call('SET', counter, fence, 'PX', keep)
    else
      redis.call('PEXPIRE', counter, keep)
    end
    replies[i] = 2
  else
    replies[i] = 0
  end
end
return replies
`,
);
