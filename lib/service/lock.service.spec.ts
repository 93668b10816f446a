import { RedisLockConfigError } from '../errors/redis-lock-config.error';
import { LockService } from './lock.service';

describe('new LockService()', () => {
  it('checks its options before it opens any connection', () => {
    let created: LockService | undefined;
    // Never connected to: the bad ttl is refused first.
    const redis = 'redis://127.0.0.1:6379';
    expect(() => (created = new LockService({ redis, ttl: 0 }))).toThrow(RedisLockConfigError);
    void created?.close();
  });
});
