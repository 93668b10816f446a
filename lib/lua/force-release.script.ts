import { LuaScript } from './lua-script';

/**
 * Administrative delete regardless of owner (the holder learns of it at its next renewal).
 * KEYS[1] lock key. ARGV[1] 'PUBLISH' or 'SPUBLISH', ARGV[2] the release channel (no KEY: see
 * release.script).
 * Returns 1 when a lock was deleted, else 0.
 */
export const forceReleaseScript = new LuaScript(
  'force-release',
  `
if redis.call('DEL', KEYS[1]) == 1 then
  redis.call(ARGV[1], ARGV[2], '1')
  return 1
end
return 0
`,
);
