import { createHash } from 'node:crypto';
import type { RedisCommander } from '../redis/redis-client';

/** How a script publishes a release: `SPUBLISH` on a Cluster with sharded pub/sub, else `PUBLISH`. */
export type PublishCommand = 'PUBLISH' | 'SPUBLISH';

/**
 * One Lua script, run by EVALSHA (the body is sent once per server, not per call) with an EVAL
 * fallback when the server answers NOSCRIPT — after a restart, a failover or SCRIPT FLUSH.
 *
 * Typed by what it takes and answers: `Keys` and `Args` are labelled tuples in the order the
 * script reads KEYS and ARGV, so a caller passes each one, in order, or fails to compile; `Reply`
 * is what the script returns, as ioredis hands it over (Lua integers become numbers, tables
 * arrays). The body is ours, so the reply type is the script's promise, not a runtime check.
 */
export class LuaScript<
  Keys extends readonly string[] = readonly string[],
  Args extends readonly (string | number)[] = readonly (string | number)[],
  Reply = unknown,
> {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  run(client: RedisCommander, keys: Keys, args: Args): Promise<Reply>;
  /** Runs it and resolves `map(reply)`: the mapping in the same step as the NOSCRIPT fallback. */
  run<T>(client: RedisCommander, keys: Keys, args: Args, map: (reply: Reply) => T): Promise<T>;
  run<T>(
    client: RedisCommander,
    keys: Keys,
    args: Args,
    map?: (reply: Reply) => T,
  ): Promise<Reply | T> {
    // A plain promise chain, not an async function, and one `.then` for both the reply and the
    // fallback: this is on every lock command.
    const mapped = map as ((reply: unknown) => T) | undefined;
    return client
      .evalsha(this.sha, keys.length, ...keys, ...args)
      .then(mapped, (error: unknown) => {
        if (!isNoScript(error)) throw error;
        // EVAL also caches the script, so the next EVALSHA finds it.
        const reply = client.eval(this.source, keys.length, ...keys, ...args);
        return mapped ? reply.then(mapped) : reply;
      }) as Promise<Reply | T>;
  }
}

export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
