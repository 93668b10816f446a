import { LuaScript } from './lua-script';

/**
 * The watchdog's batch renewal: compare-and-pexpire for many locks in one command, so renewing
 * 10,000 held locks costs a few dozen commands per period, not 10,000.
 * KEYS[i] lock keys. ARGV[2i-1] token of KEYS[i], ARGV[2i] its new lease in ms (Redis' clock).
 * Returns one integer per key: 1 renewed, 0 gone or held by another token.
 */
export const renewManyScript = new LuaScript(
  'renew-many',
  `
local renewed = {}
for i = 1, #KEYS do
  -- pcall: a foreign value of another type under one key (WRONGTYPE) must count as "not ours"
  -- for that lock alone, not fail the whole batch and so every other lock in it.
  if redis.pcall('GET', KEYS[i]) == ARGV[2 * i - 1] then
    renewed[i] = redis.call('PEXPIRE', KEYS[i], ARGV[2 * i])
  else
    renewed[i] = 0
  end
end
return renewed
`,
);
