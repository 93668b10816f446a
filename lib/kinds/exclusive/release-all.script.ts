import { LuaScript, type PublishCommand } from '../../lua/lua-script';
import { WAITED_MARK } from '../../lua/waited.lua';

/**
 * Compare-and-delete of a multi-key set in one step: each key is deleted only if its own token
 * still holds it, as `releaseScript` does for one; the keys still ours go in one `DEL`.
 * Keys: the lock keys (one Redis, or one Cluster slot: the engine sends a set here only then).
 * Args: the publish command, then one token per key, in order.
 * Publishes on a key's own channel (`<lock>:released`, its token as the message) only when a
 * refused try marked that lease as waited for.
 * Returns one answer per key, in order: 1 when we deleted our own lock, 0 when it had expired or
 * belongs to someone else (readers included: pcall, as in `releaseScript`).
 */
export const releaseAllScript = new LuaScript<
  readonly string[],
  readonly [publish: PublishCommand, ...tokens: string[]],
  (0 | 1)[]
>(
  'release-all',
  `
local publish = ARGV[1]
local answers, ours, wake = {}, {}, {}
for i, lockKey in ipairs(KEYS) do
  local token = ARGV[i + 1]
  local value = redis.pcall('GET', lockKey)
  answers[i] = 0
  if value == token then
    answers[i] = 1
    ours[#ours + 1] = lockKey
  elseif value == '${WAITED_MARK}' .. token then
    answers[i] = 1
    ours[#ours + 1] = lockKey
    wake[#wake + 1] = i
  end
end
if #ours > 0 then redis.call('DEL', unpack(ours)) end
-- Woken after every key is free: a waiter for several of them finds them all free.
for _, i in ipairs(wake) do redis.call(publish, KEYS[i] .. ':released', ARGV[i + 1]) end
return answers
`,
);
