import type { BusyLogLevel, LockFailure } from '../../options/redis-lock-options';
import { httpAnswer, logLockFailure } from '../shared/lock-failure-answer';
import { headersSent, isLockFailure } from './lock-http-exception';

/**
 * What an HTTP route's caller gets for `error`: a lock failure as `toException` shapes it (and a
 * log line, once, with what the answer leaves out); any other error untouched. Shared by the
 * interceptor and by routes `@Locked` locks without one.
 */
export function answerHttpLockFailure(
  error: unknown,
  where: string,
  response: unknown,
  toException: (failure: LockFailure) => unknown,
  busyLevel: BusyLogLevel,
): unknown {
  if (!isLockFailure(error)) return error;
  const exception = toException(error);
  logLockFailure(error, where, httpAnswer(exception, headersSent(response)), busyLevel);
  return exception;
}
