/**
 * Each store declares the lock kinds and strategies it serves, and what it cannot serve is refused
 * by one check: at startup for what the module's options and `@Locked` decorations already say,
 * at the call for a call's own options — with the same error and the same words either way, never
 * from deep inside the store. Against three real Redlock primaries of this file's own.
 */
import { Injectable, Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import {
  Locked,
  LockService,
  RedisLockConfigError,
  RedisLockModule,
  type RedisLockModuleOptions,
} from 'nestjs-redis-lock';
import { stopAllRedis, type RedisServer } from './support/redis-server';
import { nodeCommand, startIndependentPrimaries } from './support/topologies';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('store-capabilities');
const PERMITS_REFUSED = /Semaphores \(`permits`\) need one Redis or a Cluster/;
const READS_REFUSED = /Read locks \(mode 'read'\) are not available with `redlock`/;
let nodes: RedisServer[] = [];
let redlock: NonNullable<RedisLockModuleOptions['redlock']>;

beforeAll(async () => {
  jest.spyOn(Logger.prototype, 'warn').mockImplementation(() => undefined);
  nodes = await startIndependentPrimaries(3);
  redlock = { nodes: nodes.map((node) => node.url), restartGrace: 0 };
}, 30_000);

afterAll(async () => {
  await stopAllRedis();
  jest.restoreAllMocks();
});

@Injectable()
class ExportService {
  @Locked('export:<id>', { permits: 2 })
  async run(id: string): Promise<string> {
    return id;
  }
}

@Injectable()
class ReportService {
  @Locked('report:<id>', { mode: 'read' })
  async read(id: string): Promise<string> {
    return id;
  }
}

@Injectable()
class PlainService {
  @Locked('plain:<id>')
  async run(id: string): Promise<string> {
    return id;
  }
}

/** Compiles and inits a module on the Redlock nodes with `provider`; resolves the error, if any. */
async function bootstrapError(provider: new () => object): Promise<unknown> {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ redlock, prefix, startupCheck: 'off' })],
    providers: [provider],
  }).compile();
  try {
    await moduleRef.init();
    return undefined;
  } catch (error) {
    return error;
  } finally {
    await moduleRef.close().catch(() => undefined);
  }
}

/** Whether any node holds a key under this file's prefix. */
async function anyKeyWritten(): Promise<boolean> {
  const found = await Promise.all(
    nodes.map((node) => nodeCommand(node.port, 'KEYS', `${prefix}*`)),
  );
  return found.some((keys) => (keys as string[]).length > 0);
}

describe('what a Redlock quorum cannot serve', () => {
  it('refuses a @Locked semaphore at bootstrap, as it does a read lock', async () => {
    const permits = await bootstrapError(ExportService);
    expect(permits).toBeInstanceOf(RedisLockConfigError);
    expect(String(permits)).toMatch(PERMITS_REFUSED);
    const reads = await bootstrapError(ReportService);
    expect(reads).toBeInstanceOf(RedisLockConfigError);
    expect(String(reads)).toMatch(READS_REFUSED);
    // Control: a plain @Locked on the same nodes starts.
    expect(await bootstrapError(PlainService)).toBeUndefined();
  }, 30_000);

  it('refuses permits and reads at the call with the same error, before any node is asked', async () => {
    const locks = new LockService({ redlock, prefix, ttl: 3_000 });
    try {
      const permits = locks.acquire('job', { permits: 2 });
      await expect(permits).rejects.toBeInstanceOf(RedisLockConfigError);
      await expect(permits).rejects.toThrow(PERMITS_REFUSED);
      await expect(locks.withLock('job', () => 1, { permits: 2 })).rejects.toThrow(PERMITS_REFUSED);
      await expect(locks.tryAcquire('job', { mode: 'read' })).rejects.toThrow(READS_REFUSED);
      expect(await anyKeyWritten()).toBe(false);
      // Control: what it serves goes through on the same nodes.
      const lock = await locks.acquire('job', { wait: 10_000 });
      expect(await anyKeyWritten()).toBe(true);
      await lock.release();
    } finally {
      await locks.close();
    }
  }, 30_000);

  it.each([['fair: true', { fair: true }, /`fair` is "set with redlock"/]])(
    'refuses %s at forRoot, forRootAsync and new LockService',
    async (_, extra, message) => {
      const options: RedisLockModuleOptions = { redlock, prefix, startupCheck: 'off', ...extra };
      expect(() => new LockService(options)).toThrow(RedisLockConfigError);
      expect(() => new LockService(options)).toThrow(message);
      for (const imported of [
        RedisLockModule.forRoot(options),
        RedisLockModule.forRootAsync({ useFactory: () => options }),
      ]) {
        const compiled = Test.createTestingModule({ imports: [imported] }).compile();
        await expect(compiled).rejects.toThrow(message);
      }
    },
  );
});
