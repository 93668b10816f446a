/**
 * Lua, shared by the scripts that grant a lock: sets `fence` to the next fence of the counter at
 * `counterKey`. The counter never expires, so fences stay strictly increasing per key; a new
 * counter — or one a restart without persistence lost — starts from Redis' clock in
 * microseconds, above any fence handed out before (unless a key saw > 1 grant per µs).
 */
export const nextFenceLua = (counterKey: string): string => `
local fence = redis.call('INCR', ${counterKey})
if fence == 1 then
  local now = redis.call('TIME')
  fence = tonumber(string.format('%d', now[1] * 1000000 + now[2]))
  redis.call('SET', ${counterKey}, string.format('%d', fence))
end
`;
