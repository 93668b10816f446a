import { LuaScript } from '../../lua/lua-script';
import { isLeaseLua } from '../../lua/waited.lua';

/**
 * The watchdog's batch renewal: compare-and-pexpire for many locks in one command, so renewing
 * 10,000 held locks costs a few dozen commands per period, not 10,000.
 * Keys: for each lock i, its lock key, its fence counter and its holder record (KEYS[3i-2],
 * KEYS[3i-1], KEYS[3i]).
 * Args: how long (ms) a fence counter outlives its lease; then for each lock i its token and its
 * new lease in ms on Redis' clock (ARGV[2i], ARGV[2i+1]).
 * Returns one integer per lock: 1 renewed, 0 gone or held by another token.
 */
export const renewManyScript = new LuaScript<
  readonly [...lockFenceAndHolderKeys: string[]],
  readonly [fenceRetentionMs: number, ...tokenAndLeaseMs: (string | number)[]],
  (0 | 1)[]
>(
  'renew-many',
  `
local fenceRetentionMs = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS / 3 do
  local lockKey, fenceKey, holderKey = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local token, leaseMs = ARGV[2 * i], ARGV[2 * i + 1]
  -- pcall: a foreign value of another type under one key (WRONGTYPE) must count as "not ours"
  -- for that lock alone, not fail the whole batch and so every other lock in it.
  local value = redis.pcall('GET', lockKey)
  if ${isLeaseLua('value', 'token')} then
    -- The counter follows the lease, so it never expires under a held lock.
    redis.call('PEXPIRE', fenceKey, string.format('%d', tonumber(leaseMs) + fenceRetentionMs))
    redis.call('PEXPIRE', holderKey, leaseMs)
    renewed[i] = redis.call('PEXPIRE', lockKey, leaseMs)
  else
    renewed[i] = 0
  end
end
return renewed
`,
);
