import { createHash } from 'node:crypto';
import type { RedisCommander } from '../redis/redis-client';

/**
 * One Lua script, run by EVALSHA (the body is sent once per server, not per call) with an EVAL
 * fallback when the server answers NOSCRIPT — after a restart, a failover or SCRIPT FLUSH.
 */
export class LuaScript {
  readonly sha: string;

  constructor(
    readonly name: string,
    readonly source: string,
  ) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  run(client: RedisCommander, keys: string[], args: (string | number)[]): Promise<unknown> {
    // A plain promise chain, not an async function: this is on every lock command.
    return client.evalsha(this.sha, keys.length, ...keys, ...args).catch((error: unknown) => {
      if (!isNoScript(error)) throw error;
      // EVAL also caches the script, so the next EVALSHA finds it.
      return client.eval(this.source, keys.length, ...keys, ...args);
    });
  }
}

export function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}
