/**
 * Lua, shared by the scripts that grant a lock: sets `fence` to the next fence of the counter at
 * `counterKey`, and makes the counter live `lifetime` ms (a Lua expression: the new lease plus
 * the retention), so it outlives its lock and nothing the library writes stays forever. While
 * the counter exists, fences just count up. A new counter — first use, expired after the
 * retention, or lost to a restart — starts from a clock in microseconds, above every fence handed
 * out before unless that clock is behind the one that started the old counter by more than the
 * time since (at least the retention), and is written with its lifetime in the same SET. The
 * clock is `sinceMs` when given (a Lua expression: ms, or nil) — the grant's own reading, the
 * `since` its token carries (`sinceOfTokenLua`), which spares the script a command — else Redis'
 * (`TIME`, or the reply `clock` names when the script read it already for this grant).
 */
export const nextFenceLua = (
  counterKey: string,
  lifetime: string,
  clock?: string,
  sinceMs?: string,
): string => `
local fence = redis.call('INCR', ${counterKey})
if fence == 1 then
${
  sinceMs
    ? `  fence = ${sinceMs}
  if fence then
    fence = fence * 1000
  else
    local now = ${clock ?? "redis.call('TIME')"}
    fence = now[1] * 1000000 + now[2]
  end`
    : `  local now = ${clock ?? "redis.call('TIME')"}
  fence = now[1] * 1000000 + now[2]`
}
  fence = tonumber(string.format('%d', fence))
  redis.call('SET', ${counterKey}, string.format('%d', fence), 'PX', string.format('%d', ${lifetime}))
else
  redis.call('PEXPIRE', ${counterKey}, string.format('%d', ${lifetime}))
end
`;

/**
 * Lua: the `since` (epoch ms) a holder's token carries — `"<hex> <since> <instance id>"`, see
 * `newHolderToken` — or nil for a token that carries none.
 */
export const sinceOfTokenLua = (token: string): string =>
  `tonumber(string.match(${token}, '^%x+ (%d+) '))`;
