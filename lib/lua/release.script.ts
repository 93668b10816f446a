import { LuaScript } from './lua-script';

/**
 * Compare-and-delete: only the token that holds the key may delete it, atomically (no GET-then-DEL
 * window in which the lease expires and a new owner's key gets deleted).
 * KEYS[1] lock key.
 * ARGV[1] token, ARGV[2] 'PUBLISH', or 'SPUBLISH' on a Cluster (sharded pub/sub), ARGV[3] the
 * release channel (in the lock's hash slot). The channel is no KEY: a key that never exists makes
 * a Cluster slot in migration answer TRYAGAIN to the whole script while the lock is still there.
 * Returns 1 when we deleted our own lock, 0 when it had expired or belongs to someone else.
 */
export const releaseScript = new LuaScript(
  'release',
  `
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  -- Wake waiters at once instead of letting them sleep until their fallback timer. The message is
  -- our token, so our own process can tell the release it already handed off locally.
  redis.call(ARGV[2], ARGV[3], ARGV[1])
  return 1
end
return 0
`,
);
