import type { LockBackend } from '../backends/lock-backend';
import { lockRedisKeys } from '../keys/lock-keys';
import type { Bounded } from '../util/command-deadlines';
import type { HeldLock } from './held-lock';
import { LeaseReleaser } from './lease-releaser';
import type { ReleaseNotifier } from './release-notifier';

/** A command bound that only maps: the releaser's own logic, no timers. */
const bounded: Bounded = (command, _operation, _subject, onValue, onError) =>
  command.then(onValue, onError);

/** What the releaser reads of a held lock. */
const lockOf = (key: string, validUntil = Infinity): HeldLock =>
  ({
    key,
    token: `token-${key}`,
    redisKeys: lockRedisKeys('spec:', key),
    validUntil,
  }) as unknown as HeldLock;

/** A refusal Redis answers without running the script (a Cluster slot in migration). */
const tryAgain = (): Error =>
  Object.assign(new Error('TRYAGAIN slot moving'), { name: 'ReplyError' });

describe('LeaseReleaser', () => {
  const heard: string[] = [];
  const notifier = {
    releaseSent: (token: string) => void heard.push(`sent ${token}`),
    releaseAnswered: (_channel: string, token: string, deleted: boolean) =>
      void heard.push(`answered ${token} ${deleted}`),
  } as unknown as ReleaseNotifier;
  const throwing = (): never => {
    throw new Error('store closed');
  };

  beforeEach(() => (heard.length = 0));

  it('sends the releases of a set as one command, each answered for its own lock', async () => {
    const releaseAll = jest.fn(() => Promise.resolve([true, false]));
    const backend = { releaseAll, release: throwing } as unknown as LockBackend;
    const releaser = new LeaseReleaser(backend, undefined, notifier, bounded);
    const [a, b] = [lockOf('a'), lockOf('b')];
    const answers = releaser.together(() =>
      Promise.all([a, b].map((lock) => releaser.release(lock, (deleted) => deleted))),
    );
    await expect(answers).resolves.toEqual([true, false]);
    expect(releaseAll).toHaveBeenCalledTimes(1);
    expect(heard).toEqual([
      'sent token-a',
      'sent token-b',
      'answered token-a true',
      'answered token-b false',
    ]);
  });

  it('rejects every release of a set whose command throws at once, instead of leaving them pending', async () => {
    const backend = { releaseAll: throwing, release: throwing } as unknown as LockBackend;
    const releaser = new LeaseReleaser(backend, undefined, notifier, bounded);
    const [a, b] = [lockOf('a'), lockOf('b')];
    const releases = releaser.together(() =>
      [a, b].map((lock) => releaser.release(lock, (deleted) => deleted)),
    );
    for (const release of releases) await expect(release).rejects.toThrow('store closed');
    expect(heard).toContain('answered token-b false');
  });

  it('rejects a single release whose command throws at once (control: the plain path)', async () => {
    const backend = { release: throwing } as unknown as LockBackend;
    const releaser = new LeaseReleaser(backend, undefined, notifier, bounded);
    let release: Promise<boolean> | undefined;
    expect(() => (release = releaser.release(lockOf('a'), (deleted) => deleted))).not.toThrow();
    await expect(release).rejects.toThrow('store closed');
    expect(heard).toEqual(['sent token-a', 'answered token-a false']);
  });

  it('releases each key by itself, answered on its own, when the store cannot send them as one', async () => {
    const release = jest.fn((keys: { lock: string }) => Promise.resolve(keys.lock.endsWith('{a}')));
    const backend = { releaseAll: () => undefined, release } as unknown as LockBackend;
    const releaser = new LeaseReleaser(backend, undefined, notifier, bounded);
    const answers = releaser.together(() =>
      Promise.all([lockOf('a'), lockOf('b')].map((lock) => releaser.release(lock, (d) => d))),
    );
    await expect(answers).resolves.toEqual([true, false]);
    expect(release).toHaveBeenCalledTimes(2);
  });

  it('sends a refused set again while any of its leases runs, one having lapsed', async () => {
    jest.useFakeTimers();
    try {
      const releaseAll = jest
        .fn()
        .mockReturnValueOnce(Promise.reject(tryAgain()))
        .mockReturnValueOnce(Promise.resolve([false, true]));
      const backend = { releaseAll, release: throwing } as unknown as LockBackend;
      const releaser = new LeaseReleaser(backend, undefined, notifier, bounded);
      const lapsed = lockOf('a', 0); // its deadline is behind us: its key is gone anyway
      const answers = releaser.together(() =>
        Promise.all([lapsed, lockOf('b')].map((lock) => releaser.release(lock, (d) => d))),
      );
      await jest.advanceTimersByTimeAsync(1_000);
      await expect(answers).resolves.toEqual([false, true]);
      expect(releaseAll).toHaveBeenCalledTimes(2);
    } finally {
      jest.useRealTimers();
    }
  });
});
