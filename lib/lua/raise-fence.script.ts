import { LuaScript } from './lua-script';

/**
 * Redlock: writes a grant's fence (the highest counter among the granting nodes) back to a node
 * whose counter is lower, while the grant still holds the key there — so the next grant on this
 * node, which can only come after our key is gone, counts up from our fence.
 * KEYS[1] lock key, KEYS[2] fence counter. ARGV[1] token, ARGV[2] fence.
 * Returns 1 when the counter is now at least the fence, 0 when the key is no longer ours here.
 */
export const raiseFenceScript = new LuaScript(
  'raise-fence',
  `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local current = tonumber(redis.call('GET', KEYS[2]))
-- No counter (lost since the grant): the next grant here starts from the clock, above the fence.
if current and current < tonumber(ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2], 'XX', 'KEEPTTL')
end
return 1
`,
);
