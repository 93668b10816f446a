import { LuaScript } from './lua-script';

/**
 * Administrative delete regardless of owner (the holder learns of it at its next renewal).
 * KEYS[1] lock key, KEYS[2] release channel. ARGV[1] 'PUBLISH' or 'SPUBLISH'.
 * Returns 1 when a lock was deleted, else 0.
 */
export const forceReleaseScript = new LuaScript(
  'force-release',
  `
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call(ARGV[1], KEYS[2], '1')
  return 1
end
return 0
`,
);
