/**
 * One key, however it is written: `@Locked('order:<id>')` with id 'alice-42' and
 * `LockService.acquire('order:alice-42')` are the same lock, for every value that needs no
 * escaping; a value that does is escaped once, and that escaped text is what Redis shows.
 */
import { Injectable, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { currentLock, Locked, LockNotAcquiredError, LockService } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { Gate, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, leaseKey } from './decorator-app';

@Injectable()
class Orders {
  @Locked('order:<id>')
  async place(id: string, gate?: Gate): Promise<string> {
    await gate?.opened;
    return currentLock()!.key;
  }

  @Locked('order:<id>:items')
  async items(id: string, gate?: Gate): Promise<string> {
    await gate?.opened;
    return currentLock()!.key;
  }
}

const prefix = uniquePrefix('one-key');
let app: INestApplication;
let orders: Orders;
let locks: LockService;
let redis: Redis;

beforeAll(async () => {
  redis = redisClient();
  app = await createDecoratorApp({ prefix, providers: [Orders] });
  orders = app.get(Orders);
  locks = app.get(LockService);
});

afterAll(async () => {
  await app?.close();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

describe('@Locked and LockService name one lock', () => {
  it.each<[string, 'place' | 'items', string]>([
    ['order:<id>', 'place', 'alice-42'],
    ['order:<id>', 'place', 'alice@example.com'],
    ['order:<id>', 'place', 'zoë:日本'],
    ['order:<id>:items', 'items', 'alice-42'],
    ['order:<id>:items', 'items', 'a:b'],
  ])(
    '%s with %p excludes LockService on the same text, both ways',
    async (template, method, id) => {
      const text = template.replace('<id>', id);
      // @Locked holds: LockService finds the same lock busy.
      const gate = new Gate();
      const running = orders[method](id, gate);
      await waitFor(() => locks.isLocked(text), 2_000);
      expect(await locks.tryAcquire(text)).toBeNull();
      gate.release();
      expect(await running).toBe(text);

      // LockService holds: @Locked (wait 0) finds it busy.
      const manual = await locks.acquire(text);
      await expect(orders[method](id)).rejects.toBeInstanceOf(LockNotAcquiredError);
      expect(await manual.release()).toBe(true);
    },
  );

  it('escapes a value that needs it once: Redis shows the key @Locked reports', async () => {
    const gate = new Gate();
    const running = orders.place('a:b*{}', gate);
    await waitFor(() => locks.isLocked('order:a:b%2A%7B%7D'), 2_000);
    expect(await redis.exists(leaseKey(prefix, 'order:a:b%2A%7B%7D'))).toBe(1);
    // The escaped text is the key; the raw text, which needs escaping, names another lock.
    expect(await locks.tryAcquire('order:a:b%2A%7B%7D')).toBeNull();
    const raw = await locks.tryAcquire('order:a:b*{}');
    expect(raw).not.toBeNull();
    expect(await redis.exists(leaseKey(prefix, 'order:a:b*{}'))).toBe(1);
    await raw!.release();
    gate.release();
    expect(await running).toBe('order:a:b%2A%7B%7D');
  });
});
