import { LuaScript } from './lua-script';

/**
 * Compare-and-pexpire: renew (watchdog) or extend (user) the lease only while we still own it.
 * KEYS[1] lock key. ARGV[1] token, ARGV[2] new lease in ms, counted from now on Redis' clock.
 * Returns 1 when renewed, 0 when the key is gone or another holder owns it.
 */
export const extendScript = new LuaScript(
  'extend',
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`,
);
