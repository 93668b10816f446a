import { multiKeyMessages } from '../errors/messages';
import { RedisLockConfigError } from '../errors/errors';
import { assertExclusiveOnly } from '../options/multi-key-options';

/**
 * The key templates of `@Locked([...])`, checked at class definition: a non-empty array of
 * strings (each then parsed and, at bootstrap, checked like a single template), and options that
 * ask for nothing but exclusive locks. Throws `RedisLockConfigError`.
 */
export function multiKeyTemplates(
  templates: readonly unknown[],
  options: object,
  where: string,
): string[] {
  assertExclusiveOnly(options);
  if (templates.length === 0) {
    throw new RedisLockConfigError(`@Locked() on ${where}: ${multiKeyMessages.noKeys()}`);
  }
  return templates.map((template) => {
    if (typeof template !== 'string') {
      const what = `an array holding ${typeof template}`;
      throw new RedisLockConfigError(`@Locked() on ${where}: ${multiKeyMessages.notAnArray(what)}`);
    }
    return template;
  });
}
