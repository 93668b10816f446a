import { RedisLockConfigError } from '../errors/errors';
import { assertKnownOptions, closestName } from './known-options';

describe('closestName', () => {
  const names = ['redis', 'prefix', 'ttl', 'wait', 'commandTimeout', 'minReplicas', 'options'];

  it.each([
    ['keyPrefix', 'prefix'],
    ['comandTimeout', 'commandTimeout'],
    ['CommandTimeout', 'commandTimeout'],
    ['wiat', 'wait'],
    ['replicas', 'minReplicas'],
    ['option', 'options'],
    ['tll', 'ttl'],
  ])('suggests %s → %s', (name, expected) => {
    expect(closestName(name, names)).toBe(expected);
  });

  it.each(['colour', 'host', 'x', 'url'])('suggests nothing for %s', (name) => {
    expect(closestName(name, names)).toBeUndefined();
  });
});

describe('assertKnownOptions', () => {
  const known = { ttl: true, wait: true };

  it('accepts known keys, also when their value is undefined', () => {
    expect(() => assertKnownOptions('here', { ttl: 1, wait: undefined }, known)).not.toThrow();
  });

  it('refuses an unknown key with the place, the hint and the valid names', () => {
    expect(() => assertKnownOptions('@Locked() on A.b', { wiat: 1 }, known)).toThrow(
      new RedisLockConfigError(
        '@Locked() on A.b: `wiat` is not an option; did you mean `wait`? Valid options: ttl, wait.',
      ),
    );
  });
});
