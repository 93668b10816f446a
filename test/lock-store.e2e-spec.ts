/**
 * The store is injected: `RedisLockModule` provides it under `LOCK_STORE`, built from its options,
 * and its `LockService` runs on whatever that token holds — the testing module's in-memory store,
 * or a test's override. A store is closed by whoever made it: the module's own goes with the
 * module, a store provided from elsewhere stays open. The store's capabilities are checked against
 * the options whichever store it is.
 */
import { Test } from '@nestjs/testing';
import {
  LOCK_STORE,
  LockService,
  RedisLockConfigError,
  RedisLockModule,
  type LockStore,
} from 'nestjs-redis-lock';
import { RedisLockTestingModule } from 'nestjs-redis-lock/testing';
import { MemoryLockBackend } from '../lib/backends/memory.backend';
import { SHARED_REDIS_URL } from './support/shared-redis';
import { uniquePrefix } from './support/unique-prefix';

const prefix = uniquePrefix('lock-store');
const options = { redis: SHARED_REDIS_URL, prefix, startupCheck: 'off' } as const;

/** The backend inside a store (internal to the package; read here to spy on its close). */
function backendOf(store: LockStore): MemoryLockBackend {
  return (store as unknown as { backend: MemoryLockBackend }).backend;
}

it('provides the store under LOCK_STORE, and the service runs on it', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockTestingModule.forRoot()],
  }).compile();
  await moduleRef.init();
  const store = moduleRef.get<LockStore>(LOCK_STORE);
  expect(backendOf(store)).toBeInstanceOf(MemoryLockBackend);
  const locks = moduleRef.get(LockService);
  const lock = await locks.acquire('job');
  expect(await locks.isLocked('job')).toBe(true);
  await lock.release();
  // Made for the module's service: closed with it.
  const close = jest.spyOn(backendOf(store), 'close');
  await moduleRef.close();
  expect(close).toHaveBeenCalledTimes(1);
});

it('runs a real module on a store a test provides, and leaves that store open', async () => {
  const backend = new MemoryLockBackend();
  const close = jest.spyOn(backend, 'close');
  const moduleRef = await Test.createTestingModule({ imports: [RedisLockModule.forRoot(options)] })
    .overrideProvider(LOCK_STORE)
    .useValue({ backend })
    .compile();
  await moduleRef.init();
  const lock = await moduleRef.get(LockService).acquire('job');
  // The lock lives in the provided store, not in Redis.
  expect(await backend.isLocked(moduleRef.get(LockService).engine.keysOf('job'))).toBe(true);
  await lock.release();
  await moduleRef.close();
  expect(close).not.toHaveBeenCalled();
  await backend.close();
});

it('closes the store the module built from its options with the module', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(options)],
  }).compile();
  await moduleRef.init();
  const store = moduleRef.get<LockStore>(LOCK_STORE);
  const close = jest.spyOn(backendOf(store), 'close');
  await moduleRef.close();
  expect(close).toHaveBeenCalledTimes(1);
});

it('checks a provided store against the options too', async () => {
  const replicaAck = { minReplicas: 1, timeout: 100 };
  const compiled = Test.createTestingModule({
    imports: [RedisLockModule.forRoot({ ...options, replicaAck })],
  })
    .overrideProvider(LOCK_STORE)
    .useValue({ backend: new MemoryLockBackend() })
    .compile();
  await expect(compiled).rejects.toThrow(RedisLockConfigError);
  await expect(compiled).rejects.toThrow(/`replicaAck` is "set with memory"/);
});

it('closes the store it built when its LockService was replaced (a test double)', async () => {
  const double = { acquire: () => Promise.reject(new Error('not used')) };
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(options)],
  })
    .overrideProvider(LockService)
    .useValue(double)
    .compile();
  await moduleRef.init();
  const store = moduleRef.get<LockStore>(LOCK_STORE);
  const close = jest.spyOn(backendOf(store), 'close');
  await moduleRef.close();
  // Nobody else runs on it: left open, its connection would keep the process alive.
  expect(close).toHaveBeenCalledTimes(1);
});

it('control: a store the service claimed is closed once, by the service', async () => {
  const moduleRef = await Test.createTestingModule({
    imports: [RedisLockModule.forRoot(options)],
  }).compile();
  await moduleRef.init();
  const close = jest.spyOn(backendOf(moduleRef.get<LockStore>(LOCK_STORE)), 'close');
  await moduleRef.close();
  expect(close).toHaveBeenCalledTimes(1);
});
