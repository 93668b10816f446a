import { LuaScript } from '../../lua/lua-script';
import type { PublishCommand } from '../../lua/lua-script';

/**
 * A waiting writer gives up (out of budget, cancelled): its entry leaves the writers' waiting
 * set, and the readers it held back are woken on the lock's channel instead of waiting for the
 * entry to lapse (`wake-all:<id>`: every waiter of the lock in each process).
 * Keys: the writers waiting. Args: the call's id, the publish command, the release channel.
 * Returns 1 when the entry was there.
 */
export const writerLeaveScript = new LuaScript<
  readonly [writersWaitingKey: string],
  readonly [waitId: string, publish: PublishCommand, channel: string],
  0 | 1
>(
  'writer-leave',
  `
if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call(ARGV[2], ARGV[3], 'wake-all:' .. ARGV[1])
return 1
`,
);
