import { messages } from '../errors/messages';
import { RedisCommandError, RedisLockError, RedisUnavailableError } from '../errors/errors';
import type { ConnectionWatch } from '../redis/connection-watch';
import { finalReplyErrorCode } from '../redis/reply-error';

/**
 * What a failed backend command means to the caller of a lock call:
 * - the connections cannot work (never connected, credentials refused): that cause, with the
 *   addresses — a queued command flushed with it, or timed out meanwhile, says why;
 * - an error of this library (a timeout, a lost lock): as it is;
 * - an error reply Redis gave (NOPERM, OOM, WRONGTYPE…): `RedisCommandError` with its code —
 *   Redis answered, so retrying the same command will not help;
 * - anything else (a dropped connection, a reset): `RedisUnavailableError`, which an acquire call
 *   retries while its `wait` budget lasts.
 */
export function commandFailure(
  error: unknown,
  connections: ConnectionWatch,
  operation: string,
  subject: string,
): Error {
  const down = connections.unavailable();
  if (down) return down;
  if (error instanceof RedisLockError) return error;
  const code = finalReplyErrorCode(error);
  if (code !== undefined) {
    const message = messages.commandRefused(operation, subject, (error as Error).message, code);
    return new RedisCommandError(message, code, { cause: error });
  }
  const reason = error instanceof Error ? error.message : String(error);
  return new RedisUnavailableError(messages.commandFailed(operation, reason), { cause: error });
}
