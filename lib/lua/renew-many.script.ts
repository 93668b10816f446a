import { LuaScript } from './lua-script';

/**
 * The watchdog's batch renewal: compare-and-pexpire for many locks in one command, so renewing
 * 10,000 held locks costs a few dozen commands per period, not 10,000.
 * KEYS[2i-1] lock keys, KEYS[2i] the fence counter of KEYS[2i-1]. ARGV[1] how long (ms) a fence
 * counter outlives its lease; ARGV[2i] token of lock i, ARGV[2i+1] its new lease in ms (Redis'
 * clock). Returns one integer per lock: 1 renewed, 0 gone or held by another token.
 */
export const renewManyScript = new LuaScript(
  'renew-many',
  `
local retention = tonumber(ARGV[1])
local renewed = {}
for i = 1, #KEYS / 2 do
  local lease = ARGV[2 * i + 1]
  -- pcall: a foreign value of another type under one key (WRONGTYPE) must count as "not ours"
  -- for that lock alone, not fail the whole batch and so every other lock in it.
  if redis.pcall('GET', KEYS[2 * i - 1]) == ARGV[2 * i] then
    -- The counter follows the lease, so it never expires under a held lock.
    redis.call('PEXPIRE', KEYS[2 * i], string.format('%d', tonumber(lease) + retention))
    renewed[i] = redis.call('PEXPIRE', KEYS[2 * i - 1], lease)
  else
    renewed[i] = 0
  end
end
return renewed
`,
);
