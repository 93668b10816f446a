import { LuaScript } from './lua-script';
import { isLeaseLua } from './waited.lua';

/**
 * Redlock: writes a grant's fence (the highest counter among the granting nodes) back to a node
 * whose counter is lower, while the grant still holds the key there — so the next grant on this
 * node, which can only come after our key is gone, counts up from our fence.
 * Keys: the lock key, its fence counter. Args: the token, the fence.
 * Returns 1 when the counter is now at least the fence, 0 when the key is no longer ours here.
 */
export const raiseFenceScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string],
  readonly [token: string, fence: string],
  0 | 1
>(
  'raise-fence',
  `
local lockKey, fenceKey = KEYS[1], KEYS[2]
local token, fence = ARGV[1], ARGV[2]
local value = redis.call('GET', lockKey)
if not ${isLeaseLua('value', 'token')} then return 0 end
local current = tonumber(redis.call('GET', fenceKey))
-- No counter (lost since the grant): the next grant here starts from the clock, above the fence.
if current and current < tonumber(fence) then
  redis.call('SET', fenceKey, fence, 'XX', 'KEEPTTL')
end
return 1
`,
);
