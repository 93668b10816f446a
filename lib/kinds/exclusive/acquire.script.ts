import { nextFenceLua } from '../../lua/fence.lua';
import { LuaScript } from '../../lua/lua-script';
import { lockTypeLua } from '../../lua/lock-type.lua';
import { coverLua } from '../../lua/read-fence.lua';
import { isLeaseLua, markWaitedLua, WAITED_MARK } from '../../lua/waited.lua';

/**
 * Acquire in one round trip and one atomic step (no SETNX-then-EXPIRE window). The key alone: a
 * mutex, or a read-write lock's writer. Readers and a semaphore's permits hold the same key as a
 * sorted set (see lock-type.lua), so `SET NX` fails while they do, and only then does the script
 * look at them (the same way for both: it joins neither).
 * A writer that will wait names itself (`waitId`, one per acquire call): refused because of
 * readers, or already waiting, it enters or refreshes its entry in the writers' waiting set,
 * which holds back new readers until it gets in, leaves, or its entry lapses (`entryMs` after its
 * last try); it is told to try again within a third of that.
 * Keys: the lock key, its fence counter, and (only with a waiting writer's id) its writers
 * waiting (same hash slot).
 * Args: the token (which carries who holds it, for inspection: see `newHolderToken`), the lease in
 * ms, the fence counter's lifetime in ms (the lease plus how long the counter outlives it), and
 * only for a writer that will wait with writer priority: its id and its entry's lifetime in ms.
 * The uncontended try sends two keys and three args, and runs three commands: `SET NX PX`, `INCR`,
 * and the counter's `PEXPIRE` (a new counter: `TIME` and a `SET` in its place, see fence.lua).
 * A try refused by another holder's lease marks it as waited for (waited.lua), so that its
 * release publishes; so does a writer granted out of the writers waiting, which held back the
 * readers that came meanwhile.
 * Returns the fence (> 0) when granted, or -(ms until another try is worth it) when busy: the
 * holder's PTTL (0 if it expires now), or the last reader's or permit's lease left — in a table of its own,
 * {-ms}, when the writer is (now) in the waiting set, so the caller knows to leave it if it
 * gives up.
 */
export const acquireScript = new LuaScript<
  | readonly [lockKey: string, fenceKey: string]
  | readonly [lockKey: string, fenceKey: string, writersWaitingKey: string],
  | readonly [token: string, leaseMs: number, fenceLifetimeMs: number]
  | readonly [
      token: string,
      leaseMs: number,
      fenceLifetimeMs: number,
      waitId: string,
      entryMs: number,
    ],
  number | [waitingRetry: number]
>(
  'acquire',
  `
local lockKey, fenceKey, waitingKey = KEYS[1], KEYS[2], KEYS[3]
local token, leaseMs, fenceLifetimeMs = ARGV[1], ARGV[2], ARGV[3]
-- No waiting writer: no id, and its key (KEYS[3]) is neither sent nor touched.
local waitId, entryMs = ARGV[4] or '', tonumber(ARGV[5])
local function grant()
  if not redis.call('SET', lockKey, token, 'NX', 'PX', leaseMs) then return nil end
  -- A writer that waited held new readers back meanwhile: its release must wake them.
  if waitId ~= '' and redis.call('ZREM', waitingKey, waitId) == 1 then
    redis.call('SET', lockKey, '${WAITED_MARK}' .. token, 'KEEPTTL')
  end
${nextFenceLua('fenceKey', 'fenceLifetimeMs')}
  return fence
end
-- Enters or refreshes this writer's entry; the next try comes before it can lapse.
local function waitAsWriter(now, retry)
  redis.call('ZADD', waitingKey, now + entryMs, waitId)
${coverLua('waitingKey', 'entryMs')}  return { -math.max(0, math.min(retry, math.floor(entryMs / 3))) }
end
local function clockMs()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
local granted = grant()
if granted then return granted end
${lockTypeLua('lockKey', 'clockMs()')}
if lockType == 'none' then
  -- Only lapsed shares of crashed readers (or permits) were in the way, and they are gone now.
  granted = grant()
  if granted then return granted end
elseif lockType == 'zset' then
  -- Readers or permits hold it: wait for the last live one (0: it ends in this ms).
  if waitId ~= '' then return waitAsWriter(clockMs(), sharesLeft) end
  return -sharesLeft
end
local holder = redis.call('GET', lockKey)
if ${isLeaseLua('holder', 'token')} then
  -- Our own grant, executed again: ioredis re-sent the command after a connection reset lost the
  -- first reply. Nobody else can have moved the counter while we hold the lock, and it lives
  -- at least as long as the lock.
  return tonumber(redis.call('GET', fenceKey))
end
-- Busy: the holder's release must wake us. Then tell the caller how long the holder's lease
-- still runs (Redis' clock, not ours).
${markWaitedLua('lockKey', 'holder')}local pttl = redis.call('PTTL', lockKey)
if pttl < 0 then pttl = 0 end
-- A writer that waited for readers keeps holding them back while another writer goes first.
if waitId ~= '' and redis.call('ZSCORE', waitingKey, waitId) then
  return waitAsWriter(clockMs(), pttl)
end
return -pttl
`,
);
