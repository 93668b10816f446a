import { nextFenceLua } from '../../lua/fence.lua';
import { LuaScript } from '../../lua/lua-script';

/**
 * Fair mode's uncontended path, in scripts that send no more than default mode's do: the full
 * fair scripts take six keys and four to six arguments, and on a busy server parsing them costs
 * as much as the work. Anything but the uncontended case answers "not here" (0), and the caller
 * sends the full script, which decides it.
 */

/**
 * A fair try that takes a free lock nobody queues for, as the full script's first path does (no
 * holder record: the token names its holder; unmarked). A try that does not queue (a call's first,
 * and every try of a writer with `writerPriority: false`) sends it first.
 * Keys: the lock, its fence counter, the queue. Args: the token, the lease in ms, the fence
 * counter's lifetime in ms.
 * Returns the fence (> 0) when granted; 0 when a queue exists or the key is taken (nothing
 * written, nothing marked: the full script's try, sent next, does that).
 */
export const fairQuickAcquireScript = new LuaScript<
  readonly [lockKey: string, fenceKey: string, queueKey: string],
  readonly [token: string, leaseMs: number, fenceLifetimeMs: number],
  number
>(
  'fair-quick-acquire',
  `
local lockKey, fenceKey, queueKey = KEYS[1], KEYS[2], KEYS[3]
local token, leaseMs, fenceLifetimeMs = ARGV[1], ARGV[2], ARGV[3]
if redis.call('EXISTS', queueKey) == 1 then return 0 end
if not redis.call('SET', lockKey, token, 'NX', 'PX', leaseMs) then return 0 end
${nextFenceLua('fenceKey', 'fenceLifetimeMs')}
return fence
`,
);

/**
 * The release of a lease granted by `fairQuickAcquireScript`, while it is still unmarked: nobody
 * was refused while it was held, so nobody queued behind it (a waiter queues only after a refused
 * try, which marks the lease), and there is nothing to hand over, nobody to wake, no holder record
 * to delete.
 * Keys: the lock. Args: the token.
 * Returns 1 when it deleted our unmarked lease; 0 otherwise — marked, someone else's, gone, or
 * readers' (pcall): the full release, sent next, hands over, wakes, or answers "not ours".
 */
export const fairQuickReleaseScript = new LuaScript<
  readonly [lockKey: string],
  readonly [token: string],
  0 | 1
>(
  'fair-quick-release',
  `
if redis.pcall('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1
`,
);
