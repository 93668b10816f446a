import { LuaScript } from './lua-script';
import type { PublishCommand } from './release.script';

/**
 * Administrative delete regardless of owner (the holder learns of it at its next renewal).
 * Keys: the lock key. Args: the publish command, the release channel (no KEY: see
 * release.script).
 * Returns 1 when a lock was deleted, else 0.
 */
export const forceReleaseScript = new LuaScript<
  readonly [lockKey: string],
  readonly [publish: PublishCommand, channel: string],
  0 | 1
>(
  'force-release',
  `
local lockKey = KEYS[1]
local publish, channel = ARGV[1], ARGV[2]
if redis.call('DEL', lockKey) == 1 then
  redis.call(publish, channel, '1')
  return 1
end
return 0
`,
);
