import { LuaScript } from './lua-script';
import { isLeaseLua } from './waited.lua';

/**
 * Redlock's batch renewal on one node: compare-and-pexpire, and repair where the key is missing.
 * A node that restarted empty, or whose stale key blocked our grant and has since run out, gets our
 * key back, so a held lock returns to every reachable node instead of shrinking towards a bare
 * quorum. The caller counts only keys that were still there as votes (a re-created key proves
 * nothing about the past) and deletes the re-created ones again unless a quorum said "ours".
 * Keys: for each lock i, its lock key, its fence counter and its holder record (KEYS[3i-2],
 * KEYS[3i-1], KEYS[3i]). A re-created key gets no holder record: inspection takes the holder from
 * a node that granted it.
 * Args: how long (ms) a fence counter outlives its lease; then for each lock i its token, its
 * lease in ms and the holder's fence (ARGV[3i-1], ARGV[3i], ARGV[3i+1]).
 * Returns one integer per lock: 1 renewed, 2 re-created here, 0 held by another token.
 */
export const redlockRenewScript = new LuaScript<
  readonly [...lockFenceAndHolderKeys: string[]],
  readonly [fenceRetentionMs: string, ...tokenLeaseMsAndFence: string[]],
  (0 | 1 | 2)[]
>(
  'redlock-renew',
  `
local fenceRetentionMs = tonumber(ARGV[1])
local replies = {}
for i = 1, #KEYS / 3 do
  local lockKey, fenceKey, holderKey = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local token, leaseMs, fence = ARGV[3 * i - 1], ARGV[3 * i], ARGV[3 * i + 1]
  -- The counter follows the lease, so it never expires under a held lock.
  local keep = string.format('%d', tonumber(leaseMs) + fenceRetentionMs)
  -- pcall: a foreign value of another type (WRONGTYPE) counts as another holder, for this lock only.
  local value = redis.pcall('GET', lockKey)
  if ${isLeaseLua('value', 'token')} then
    redis.call('PEXPIRE', fenceKey, keep)
    redis.call('PEXPIRE', holderKey, leaseMs)
    replies[i] = redis.call('PEXPIRE', lockKey, leaseMs)
  elseif value == false then
    redis.call('SET', lockKey, token, 'PX', leaseMs)
    -- A counter below our fence (this node missed grants, or lost it): raise it, so a later grant
    -- here cannot hand out a lower fence.
    local current = tonumber(redis.pcall('GET', fenceKey))
    if not current or current < tonumber(fence) then
      redis.call('SET', fenceKey, fence, 'PX', keep)
    else
      redis.call('PEXPIRE', fenceKey, keep)
    end
    replies[i] = 2
  else
    replies[i] = 0
  end
end
return replies
`,
);
