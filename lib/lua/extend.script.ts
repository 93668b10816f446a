import { LuaScript } from './lua-script';

/**
 * Compare-and-pexpire: renew (watchdog) or extend (user) the lease only while we still own it.
 * KEYS[1] lock key, KEYS[2] its fence counter. ARGV[1] token, ARGV[2] new lease in ms, counted
 * from now on Redis' clock, ARGV[3] how long (ms) the fence counter outlives the lease.
 * Returns 1 when renewed, 0 when the key is gone or another holder owns it.
 */
export const extendScript = new LuaScript(
  'extend',
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  -- The counter follows the lease, so it never expires under a held lock.
  redis.call('PEXPIRE', KEYS[2], string.format('%d', tonumber(ARGV[2]) + tonumber(ARGV[3])))
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`,
);
