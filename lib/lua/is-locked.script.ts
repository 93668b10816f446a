import { LuaScript } from './lua-script';
import { nowMsLua } from './permit.lua';
import { liveFromLua } from './share-holders.lua';

/**
 * Whether any kind of lock on one key is held, as inspectScript would read it but without reading
 * who: the exclusive lock (a string under its name: a foreign value of another type reads as "not
 * held", as in inspectScript), or any live reader or permit under it (`liveFromLua`, the rule
 * inspection applies: the permits' when their limit is beside the set). O(log N) and a
 * one-integer reply, where inspectScript reads 12 keys and one record per holder. Writes nothing.
 * The keys share the hash tag: one slot on a Cluster.
 * Keys: the lock (a string while a writer holds it, a sorted set while readers or permits do),
 * the permits' limit.
 * Returns 1 when held, else 0.
 */
export const isLockedScript = new LuaScript<
  readonly [lockKey: string, limitKey: string],
  readonly [],
  0 | 1
>(
  'is-locked',
  `
local lockKey, limitKey = KEYS[1], KEYS[2]
if type(redis.pcall('GET', lockKey)) == 'string' then return 1 end
${nowMsLua}
local from = ${liveFromLua(false)}
if redis.call('EXISTS', limitKey) == 1 then from = ${liveFromLua(true)} end
local count = redis.pcall('ZCOUNT', lockKey, from, '+inf')
if type(count) == 'number' and count > 0 then return 1 end
return 0
`,
);
