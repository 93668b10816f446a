/**
 * Multi-key locks on the in-memory backend (`nestjs-redis-lock/testing`): the same all-or-nothing
 * grant as one Redis, through `LockService` and `@Locked([...])` on a provider, with no Redis.
 */
import { Injectable } from '@nestjs/common';
import { firstValueFrom, Observable, timer, map } from 'rxjs';
import { Test, type TestingModule } from '@nestjs/testing';
import { Locked, LockNotAcquiredError, LockService } from 'nestjs-redis-lock';
import { heldLockKeys, RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import { waitFor } from '../support/time';

@Injectable()
class Wallets {
  readonly balances = new Map<string, number>([
    ['ann', 100],
    ['bob', 100],
  ]);

  @Locked(['wallet:<from>', 'wallet:<to>'], { wait: 5_000 })
  async transfer(from: string, to: string, amount: number): Promise<string[]> {
    const a = this.balances.get(from)!;
    const b = this.balances.get(to)!;
    await new Promise((resolve) => setTimeout(resolve, 2));
    this.balances.set(from, a - amount);
    this.balances.set(to, b + amount);
    return heldLockKeys();
  }

  /** A stream holds both keys from subscribe until it ends. */
  @Locked(['wallet:<from>', 'wallet:<to>'])
  history(from: string, to: string): Observable<string[]> {
    return timer(20).pipe(map(() => [from, to]));
  }
}

describe('multi-key locks in memory', () => {
  let moduleRef: TestingModule;
  beforeEach(async () => {
    moduleRef = await Test.createTestingModule({
      imports: [RedisLockTestingModule.forRoot()],
      providers: [Wallets],
    }).compile();
    await moduleRef.init();
  });
  afterEach(() => moduleRef.close());

  it('holds all keys or none', async () => {
    const locks = moduleRef.get(LockService);
    const held = await locks.acquire(['b', 'a']);
    expect(held.keys).toEqual(['a', 'b']);
    expect(await locks.tryAcquire(['c', 'b'])).toBeNull();
    expect(await locks.isLocked('c')).toBe(false);
    await expect(locks.acquire(['c', 'a'])).rejects.toThrow(LockNotAcquiredError);
    await held.release();
    const both = await locks.acquire(['c', 'a']);
    expect(both.fences.c).toBeGreaterThan(0);
    await both.release();
  });

  it('holds every key of an Observable method while it is subscribed', async () => {
    const wallets = moduleRef.get(Wallets);
    const locks = moduleRef.get(LockService);
    const done = firstValueFrom(wallets.history('cy', 'dan'));
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await locks.tryAcquire(['wallet:dan'])).toBeNull();
    expect(await done).toEqual(['cy', 'dan']);
    // Released once the stream has ended (its hold ends right after the last value).
    await waitFor(async () => !(await locks.isLocked('wallet:cy')), 1_000);
    const after = await locks.tryAcquire(['wallet:dan', 'wallet:cy']);
    expect(after).not.toBeNull();
    await after!.release();
  });

  it('runs @Locked([...]) under every key, and keeps opposite transfers from overlapping', async () => {
    const wallets = moduleRef.get(Wallets);
    expect(await wallets.transfer('ann', 'bob', 1)).toEqual(['wallet:ann', 'wallet:bob']);
    const transfers = Array.from({ length: 20 }, (_, i) =>
      i % 2 ? wallets.transfer('ann', 'bob', 3) : wallets.transfer('bob', 'ann', 5),
    );
    await Promise.all(transfers);
    expect(wallets.balances.get('ann')! + wallets.balances.get('bob')!).toBe(200);
  });
});
