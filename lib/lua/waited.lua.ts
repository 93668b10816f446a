/**
 * Lua shared by the scripts that meet a mutex's (or a writer's) lease: a string under the lock's
 * name, its value the holder's token. A try refused by such a lease marks it as waited for — a
 * `*` before the token, the TTL kept — and only a release of a marked lease publishes the release
 * message: an uncontended release wakes nobody, so it sends nothing. A token never starts with `*`
 * (it starts with hex), so the mark cannot be mistaken for one; every compare of a lease with its
 * token accepts both forms (`isLeaseLua`), and whatever reads the holder strips it (`unmarkedLua`).
 */

/** What a lease's value starts with once a refused try marked it as waited for. */
export const WAITED_MARK = '*';

/** Lua: whether `value` (a GET reply, maybe `false` or an error table) is `token`'s lease. */
export const isLeaseLua = (value: string, token: string): string =>
  `(${value} == ${token} or ${value} == '${WAITED_MARK}' .. ${token})`;

/**
 * Lua: marks the lease under `key`, whose value `value` (a string) was just read, as waited for —
 * unless it is already. `SET … KEEPTTL` changes the value alone: the lease runs as it did.
 */
export const markWaitedLua = (key: string, value: string): string => `
if string.byte(${value}, 1) ~= ${WAITED_MARK.charCodeAt(0)} then
  redis.call('SET', ${key}, '${WAITED_MARK}' .. ${value}, 'KEEPTTL')
end
`;

/** Lua: `value` (a string) without the mark, as a token: what inspection and hand-offs read. */
export const unmarkedLua = (value: string): string =>
  `(string.byte(${value}, 1) == ${WAITED_MARK.charCodeAt(0)} and string.sub(${value}, 2) or ${value})`;
