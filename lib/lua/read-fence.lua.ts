/**
 * Lua, shared by the scripts that grant or renew a reader's share: sets `fence` to the fence
 * counter as it stands — at least the fence of every write granted before, below that of every
 * write granted after (only writers count it up) — starting a counter from Redis' clock in µs
 * (`clock`, a TIME reply) as a writer's first grant would when there is none, and keeps the
 * counter at least `lifetime` ms (a Lua expression: the lease plus the retention), never
 * shortening what another holder set.
 */
export const readFenceLua = (counterKey: string, clock: string, lifetime: string): string => `
local fence = tonumber(redis.call('GET', ${counterKey}))
if not fence then
  fence = tonumber(string.format('%d', ${clock}[1] * 1000000 + ${clock}[2]))
  redis.call('SET', ${counterKey}, string.format('%d', fence))
end
do
  local keep = ${lifetime}
  if redis.call('PTTL', ${counterKey}) < keep then
    redis.call('PEXPIRE', ${counterKey}, string.format('%d', keep))
  end
end
`;

/**
 * Lua: makes the ZSET at `zsetKey` live at least `ms` more (a Lua expression), so it outlives the
 * score (a deadline) just written, and never shortens it for the entries already there.
 */
export const coverLua = (zsetKey: string, ms: string): string => `
if redis.call('PTTL', ${zsetKey}) < ${ms} then redis.call('PEXPIRE', ${zsetKey}, ${ms}) end
`;
