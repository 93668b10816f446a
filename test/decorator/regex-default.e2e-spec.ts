/**
 * A `@Locked` provider method whose default parameter is a regular expression with a comma in it:
 * the key placeholder still names the right argument (the parameter list is read with regex
 * literals understood, not split at their commas).
 */
import { Injectable, type INestApplication } from '@nestjs/common';
import type Redis from 'ioredis';
import { currentLock, LockNotAcquiredError, Locked } from 'nestjs-redis-lock';
import { deleteKeys, redisClient } from '../support/shared-redis';
import { Gate } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';
import { createDecoratorApp, leaseKey } from './decorator-app';

const prefix = uniquePrefix('decorator-regex-default');
const inside = new Gate();
const finish = new Gate();

@Injectable()
class CsvImports {
  @Locked('import:<file>')
  async importCsv(userId: string, sep = /,\s*/, file: string): Promise<string> {
    inside.release();
    await finish.opened;
    return `${userId} ${file} ${String(sep)} ${currentLock()?.key}`;
  }
}

describe('@Locked with a regex default parameter', () => {
  let app: INestApplication | undefined;
  let redis: Redis;

  beforeAll(async () => {
    redis = redisClient();
    app = await createDecoratorApp({ prefix, providers: [CsvImports] });
  });

  afterAll(async () => {
    finish.release();
    await app?.close();
    await deleteKeys(redis, prefix);
    await redis.quit();
  });

  it('builds the key from the parameter the placeholder names, after the regex', async () => {
    const imports = app!.get(CsvImports);
    const running = imports.importCsv('user-1', undefined, 'a.csv');
    await Promise.race([inside.opened, running]); // a wrong key rejects at once
    expect(await redis.exists(leaseKey(prefix, 'import:a.csv'))).toBe(1);
    // The same file is busy for another user; the key is not the user's nor the separator's.
    await expect(imports.importCsv('user-2', /;/, 'a.csv')).rejects.toBeInstanceOf(
      LockNotAcquiredError,
    );
    finish.release();
    await expect(running).resolves.toBe('user-1 a.csv /,\\s*/ import:a.csv');
  });
});
