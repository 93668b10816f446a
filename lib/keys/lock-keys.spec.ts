import {
  lockKeyPattern,
  lockNameOf,
  lockRedisKeys,
  userKeyOf,
  type LockRedisKeys,
} from './lock-keys';

/** The part of `name` Redis Cluster hashes: the first `{…}` if it is not empty, else all of it. */
function hashTagOf(name: string): string {
  const open = name.indexOf('{');
  const close = open < 0 ? -1 : name.indexOf('}', open + 1);
  return close > open + 1 ? name.slice(open + 1, close) : name;
}

const namesOf = (keys: LockRedisKeys): string[] => [
  keys.lock,
  keys.fence,
  keys.queue,
  keys.waiters,
  keys.channel,
];

describe('lockRedisKeys', () => {
  it('puts the key into the hash tag as it is', () => {
    expect(lockRedisKeys('lock:', 'order:alice-42').lock).toBe('lock:{order:alice-42}');
    expect(lockRedisKeys('lock:', 'order:alice-42').fence).toBe('lock:{order:alice-42}:fence');
  });

  it('does not escape a key again: what a template escaped shows once in Redis', () => {
    // `@Locked('job:<x>')` with x = 'a:b*{}' renders 'job:a:b%2A%7B%7D'.
    expect(lockRedisKeys('lock:', 'job:a:b%2A%7B%7D').lock).toBe('lock:{job:a:b%2A%7B%7D}');
  });

  it('keeps %, braces inside the key and glob characters as they are', () => {
    expect(lockRedisKeys('lock:', '100%').lock).toBe('lock:{100%}');
    expect(lockRedisKeys('lock:', 'a}b{c').lock).toBe('lock:{a}b{c}');
    expect(lockRedisKeys('lock:', 'room:*').lock).toBe('lock:{room:*}');
  });

  it('puts one more "{" before a key that starts with a brace, so the hash tag is never empty', () => {
    expect(lockRedisKeys('lock:', '}x').lock).toBe('lock:{{}x}');
    expect(lockRedisKeys('lock:', '{x}').lock).toBe('lock:{{{x}}');
    expect(lockRedisKeys('lock:', '}').lock).toBe('lock:{{}}');
  });

  const alphabet = ['{', '}', '%', 'a', ':', '7D', '%7B', '{}'];
  const grid: string[] = [];
  for (const x of alphabet)
    for (const y of alphabet) for (const z of ['', ...alphabet]) grid.push(x + y + z);

  it('gives distinct keys distinct names, and no name of one lock is a name of another', () => {
    const owner = new Map<string, string>();
    for (const key of new Set(grid)) {
      for (const name of namesOf(lockRedisKeys('p:', key))) {
        expect(owner.get(name) ?? key).toBe(key);
        owner.set(name, key);
      }
    }
  });

  it("keeps all of a lock's names in one hash slot, with a non-empty hash tag", () => {
    for (const key of grid) {
      const tags = namesOf(lockRedisKeys('p:', key)).map(hashTagOf);
      expect(new Set(tags).size).toBe(1);
      expect(tags[0]).not.toBe(lockRedisKeys('p:', key).lock); // a real tag, not the whole name
    }
  });
});

describe("a semaphore's names", () => {
  it("keeps the permits under the lock name, its companions apart from the mutex's", () => {
    const mutex = lockRedisKeys('lock:', 'job');
    const semaphore = lockRedisKeys('lock:', 'job', { type: 'semaphore', permits: 2 });
    expect(semaphore.lock).toBe('lock:{job}');
    expect(semaphore.channel).toBe(mutex.channel);
    expect([
      semaphore.fence,
      semaphore.queue,
      semaphore.permitLimit,
      semaphore.permitHolders,
    ]).toEqual([
      'lock:{job}:permits:fence',
      'lock:{job}:permits:queue',
      'lock:{job}:permits:limit',
      'lock:{job}:permits:holders',
    ]);
    // Every kind names the limit where the semaphore keeps it: it tells permits from readers.
    expect(mutex.permitLimit).toBe(semaphore.permitLimit);
    expect(mutex.fence).toBe('lock:{job}:fence');
  });
});

describe('lockKeyPattern and userKeyOf', () => {
  it.each(['plain', 'a:b', '{braced}', '}closing', '{}', 'x}y{z', 'with space'])(
    'recover the key %p from its lock name',
    (key) => {
      const { lock, fence, holder, queue } = lockRedisKeys('lock:', key);
      expect(userKeyOf('lock:', lock)).toBe(key);
      // Only the lock's own name ends in "}", which the pattern asks for.
      expect([lock, fence, holder, queue].filter((name) => name.endsWith('}'))).toEqual([lock]);
    },
  );

  it.each(['plain', '{braced}', '}closing', 'x}:readers', 'y}:permits', 'z}:readers}'])(
    'tells every kind of lock of %p from the other names of its keys',
    (key) => {
      const exclusive = lockRedisKeys('lock:', key);
      const semaphore = lockRedisKeys('lock:', key, { type: 'semaphore', permits: 2 });
      const base = exclusive.lock;
      const named = [exclusive, semaphore].flatMap((keys) => [
        keys.lock,
        keys.fence,
        keys.holder,
        keys.queue,
        keys.waiters,
        keys.waiterIds,
        keys.readerHolders,
        keys.permitHolders,
        keys.writersWaiting,
        keys.permitLimit,
      ]);
      const locks = named.flatMap((name) => {
        const found = lockNameOf(name);
        return found ? [[name, found.kinds, userKeyOf('lock:', found.base)]] : [];
      });
      // One name holds every kind: the semaphore's is the mutex's (its companions differ).
      expect(semaphore.lock).toBe(base);
      expect(locks).toEqual([
        [base, ['exclusive', 'read', 'semaphore'], key],
        [base, ['exclusive', 'read', 'semaphore'], key],
      ]);
    },
  );

  it('escapes glob characters of the prefix', () => {
    expect(lockKeyPattern('a*b?[c]\\:')).toBe('a\\*b\\?\\[c\\]\\\\:{*}');
  });
});
