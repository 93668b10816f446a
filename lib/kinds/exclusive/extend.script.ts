import { LuaScript } from '../../lua/lua-script';
import { isLeaseLua } from '../../lua/waited.lua';

/**
 * Compare-and-pexpire: renew (watchdog) or extend (user) the lease only while we still own it.
 * Keys: the lock key, its fence counter, its holder record. Args: the token, the new lease in ms (counted from now
 * on Redis' clock), how long (ms) the fence counter outlives the lease.
 * Returns 1 when renewed, 0 when the key is gone or another holder owns it (readers included: they
 * hold the key as a sorted set, which the pcall'd GET reads as not ours).
 */
export const extendScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string, holderKey: string],
  readonly [token: string, leaseMs: number, fenceRetentionMs: number],
  0 | 1
>(
  'extend',
  `
local lockKey, fenceKey, holderKey = KEYS[1], KEYS[2], KEYS[3]
local token, leaseMs, fenceRetentionMs = ARGV[1], ARGV[2], ARGV[3]
local value = redis.pcall('GET', lockKey)
if ${isLeaseLua('value', 'token')} then
  -- The counter follows the lease, so it never expires under a held lock.
  redis.call('PEXPIRE', fenceKey,
    string.format('%d', tonumber(leaseMs) + tonumber(fenceRetentionMs)))
  -- The holder record lives exactly as long as the lease (absent if an older version granted it).
  redis.call('PEXPIRE', holderKey, leaseMs)
  return redis.call('PEXPIRE', lockKey, leaseMs)
end
return 0
`,
);
