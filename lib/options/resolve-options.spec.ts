import { hostname } from 'node:os';
import { RedisLockConfigError } from '../errors/errors';
import type { RedisLockModuleOptions } from './redis-lock-options';
import { resolveOptions } from './resolve-options';

/** Never connected to: options are checked before any connection is opened. */
const redis = 'redis://127.0.0.1:6379';

/** Options as a JavaScript caller (or a config object typed loosely) could pass them. */
const loose = (options: object): RedisLockModuleOptions => options;

/** What `resolveOptions(options)` threw, or undefined. */
function failureOf(options: RedisLockModuleOptions): unknown {
  try {
    resolveOptions(options);
  } catch (error) {
    return error;
  }
  return undefined;
}

describe('resolveOptions: bad values', () => {
  it.each([
    ['ttl', 0],
    ['ttl', NaN],
    ['wait', -1],
    ['commandTimeout', 0],
    ['prefix', ''],
    ['startupCheck', 'loud'],
    ['startupCheck', true],
    ['instanceId', ''],
    ['instanceId', 42],
    ['instanceId', 'x'.repeat(257)],
  ])('rejects %s = %p with RedisLockConfigError', (name, value) => {
    expect(failureOf(loose({ redis, [name]: value }))).toBeInstanceOf(RedisLockConfigError);
  });

  it.each([
    ['replicaAck.timeout', { minReplicas: 1, timeout: 0.5 }],
    ['replicaAck.timeout', { minReplicas: 1, timeout: 99.9 }],
    ['replicaAck.minReplicas', { minReplicas: 1.5, timeout: 100 }],
  ])(
    'rejects a fractional %s at startup, not at every grant (WAIT takes integers)',
    (name, replicaAck) => {
      const error = failureOf({ redis, replicaAck });
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toContain(`\`${name}\``);
    },
  );

  it.each(['redis//nope', 'http://127.0.0.1:6379', 'not a url', ''])(
    'rejects the Redis URL %p with RedisLockConfigError',
    (url) => {
      expect(failureOf({ redis: url })).toBeInstanceOf(RedisLockConfigError);
    },
  );
});

describe('resolveOptions: instanceId', () => {
  it('defaults to <hostname>:<pid>, and takes any other non-empty name', () => {
    expect(resolveOptions({ redis }).instanceId).toBe(`${hostname()}:${process.pid}`);
    expect(resolveOptions({ redis, instanceId: 'pod billing-7' }).instanceId).toBe('pod billing-7');
  });
});

describe('resolveOptions: unknown options', () => {
  it('refuses an unknown key and names the closest valid one', () => {
    const error = failureOf(loose({ redis, prefix: 'bad-input:', keyPrefix: 'orders:' }));
    expect(error).toBeInstanceOf(RedisLockConfigError);
    expect((error as Error).message).toMatch(/`keyPrefix`.*did you mean `prefix`\?/);
  });

  it('refuses unknown keys inside redlock, replicaAck and cluster', () => {
    const nodes = [redis, redis, redis];
    for (const [options, hint] of [
      [{ redlock: { nodes, nodeTimout: 100 } }, 'nodeTimeout'],
      [{ redis, replicaAck: { minReplicas: 1, timeout: 10, replicas: 1 } }, 'minReplicas'],
      [{ cluster: { nodes: [{ port: 1 }], option: {} } }, 'options'],
    ] as const) {
      const error = failureOf(loose(options));
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toMatch(new RegExp(`did you mean \`${hint}\`\\?`));
    }
  });

  it('lists the valid options when no name is close', () => {
    expect(() => resolveOptions(loose({ redis, colour: 'blue' }))).toThrow(
      /`colour` is not an option.*\bprefix\b.*\bcommandTimeout\b/s,
    );
  });
});

describe('resolveOptions: the shortest lease', () => {
  it.each([0.001, 1, 2, 2.5, 1_000.5])(
    'rejects ttl %p: a whole number of ms, with time left after the drift margin',
    (ttl) => {
      const error = failureOf({ redis, ttl });
      expect(error).toBeInstanceOf(RedisLockConfigError);
      expect((error as Error).message).toMatch(/`ttl` is .*whole number of ms of at least 3\b/);
    },
  );

  it('accepts ttl 3, the shortest lease with a positive validity on one Redis', () => {
    expect(resolveOptions({ redis, ttl: 3 }).ttl).toBe(3);
  });

  it("counts Redlock's drift: driftFactor 0.5 needs a ttl of at least 5", () => {
    const redlock = { nodes: [redis, redis, redis], driftFactor: 0.5 };
    expect((failureOf({ redlock, ttl: 4 }) as Error).message).toMatch(/at least 5\b/);
    expect(resolveOptions({ redlock, ttl: 5 }).ttl).toBe(5);
  });

  it('refuses a Redlock driftFactor of 1 or more: no lease would have any validity', () => {
    const redlock = { nodes: [redis, redis, redis], driftFactor: 1 };
    expect(failureOf({ redlock })).toBeInstanceOf(RedisLockConfigError);
  });
});
