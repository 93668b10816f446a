import { SemaphoreLimitConflictError } from '../../errors/errors';
import { semaphoreMessages } from '../../errors/messages';

/** The refusal of a permit call naming `requested` where the key's limit is `held`. */
export function limitConflict(
  lock: string,
  held: number,
  requested: number,
): SemaphoreLimitConflictError {
  const message = semaphoreMessages.limitConflict(lock, held, requested);
  return new SemaphoreLimitConflictError(message, held, requested);
}
