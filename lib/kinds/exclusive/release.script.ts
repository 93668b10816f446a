import { LuaScript, type PublishCommand } from '../../lua/lua-script';
import { WAITED_MARK } from '../../lua/waited.lua';

/**
 * Compare-and-delete: only the token that holds the key may delete it, atomically (no GET-then-DEL
 * window in which the lease expires and a new owner's key gets deleted).
 * Keys: the lock key (its value carries who holds it: nothing else to delete). Readers that took
 * the key after our lease ended hold it as a sorted set: pcall, so that reads as "not ours".
 * Args: the token, the publish command. The release channel is the lock key's name (as the
 * server sees it, any client key prefix included) plus `:released`, in the lock's hash slot: built
 * here rather than sent, one argument fewer on every release. It is no KEY: a key that never
 * exists makes a Cluster slot in migration answer TRYAGAIN to the whole script while the lock is
 * still there.
 * Publishes only when a refused try marked the lease as waited for (waited.lua): an uncontended
 * release runs `GET` and `DEL` alone.
 * Returns 1 when we deleted our own lock, 0 when it had expired or belongs to someone else.
 */
export const releaseScript = new LuaScript<
  readonly [lockKey: string],
  readonly [token: string, publish: PublishCommand],
  0 | 1
>(
  'release',
  `
local lockKey = KEYS[1]
local token, publish = ARGV[1], ARGV[2]
local value = redis.pcall('GET', lockKey)
if value == token then
  -- Nobody was refused while we held it: nobody to wake.
  redis.call('DEL', lockKey)
  return 1
end
if value == '${WAITED_MARK}' .. token then
  redis.call('DEL', lockKey)
  -- Wake waiters at once instead of letting them sleep until their fallback timer. The message is
  -- our token, so our own process can tell the release it already handed off locally.
  redis.call(publish, lockKey .. ':released', token)
  return 1
end
return 0
`,
);
