import { LuaScript } from './lua-script';
import { nowMsLua } from './permit.lua';
import { liveFromLua } from './share-holders.lua';

/**
 * Whether any kind of lock on one key is held, as inspectScript would read it but without reading
 * who: the exclusive lock (a string under its name: a foreign value of another type reads as "not
 * held", as in inspectScript), or any live reader, or any live permit (`liveFromLua`, the rule
 * inspection applies). O(log N) and a one-integer reply, where inspectScript reads 14 keys and one
 * record per holder. Writes nothing. The keys share the hash tag: one slot on a Cluster.
 * Keys: the lock (a string while a writer holds it, the readers' sorted set while they do), the
 * permits.
 * Returns 1 when held, else 0.
 */
export const isLockedScript = new LuaScript<
  readonly [lockKey: string, permitsKey: string],
  readonly [],
  0 | 1
>(
  'is-locked',
  `
local lockKey, permitsKey = KEYS[1], KEYS[2]
if type(redis.pcall('GET', lockKey)) == 'string' then return 1 end
${nowMsLua}
local function live(setKey, from)
  local count = redis.pcall('ZCOUNT', setKey, from, '+inf')
  return type(count) == 'number' and count > 0
end
if live(lockKey, ${liveFromLua(false)}) or live(permitsKey, ${liveFromLua(true)}) then return 1 end
return 0
`,
);
