/**
 * Read-write exclusion across separate Node processes, checked as the mutex fuzz checks it:
 * writers update keys A and B in two non-atomic steps, readers check A = B. Under the lock no
 * reader ever sees a write half done and no update is lost; without it (the control run) readers
 * see torn writes and writers lose updates. Then crash recovery: a reader or a writer SIGKILLed
 * while holding frees its share or its key within its ttl.
 */
import type { LockService } from 'nestjs-redis-lock';
import { killAllWorkers, spawnWorker, type Worker } from '../support/processes';
import { lockServices } from '../support/lock-services';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { now } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const WRITERS = 2;
const READERS = 2;
const WRITES = 60;
const READS = 120;

const prefix = uniquePrefix('rw-fuzz');
const redis = redisClient();
const services = lockServices({ redis: SHARED_REDIS_URL, prefix });
let writers: Worker[] = [];
let readers: Worker[] = [];

const spawn = (env: Record<string, string> = {}): Worker =>
  spawnWorker('test/fixtures/rw-worker.ts', {
    REDIS_URL: SHARED_REDIS_URL,
    PREFIX: prefix,
    ...env,
  });

beforeAll(async () => {
  writers = Array.from({ length: WRITERS }, () => spawn());
  readers = Array.from({ length: READERS }, () => spawn());
  await Promise.all([...writers, ...readers].map((w) => w.waitForOutput(/^ready$/m)));
});

afterAll(async () => {
  await killAllWorkers();
  await services.closeAll();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** One run in every worker at once: torn reads seen, and the final A and B. */
async function race(name: string, mode: 'lock' | 'nolock') {
  for (const w of writers) w.send(`run ${name} writer ${mode} ${WRITES}`);
  for (const r of readers) r.send(`run ${name} reader ${mode} ${READS}`);
  const done = new RegExp(`^done ${name} (\\d+)$`, 'm');
  const outputs = await Promise.all(
    [...writers, ...readers].map((w) => w.waitForOutput(done, 60_000)),
  );
  const torn = outputs.reduce((sum, match) => sum + Number(match[1]), 0);
  const [a, b] = await redis.mget(`${prefix}${name}:a`, `${prefix}${name}:b`);
  return { torn, a: Number(a), b: Number(b) };
}

describe(`read-write exclusion across ${WRITERS} writer and ${READERS} reader processes`, () => {
  it('shows no torn read and loses no update under the lock', async () => {
    expect(await race('locked', 'lock')).toEqual({
      torn: 0,
      a: WRITERS * WRITES,
      b: WRITERS * WRITES,
    });
  });

  it('shows torn reads and lost updates without it, so the check above can fail', async () => {
    const { torn, a } = await race('unlocked', 'nolock');
    expect(torn).toBeGreaterThan(0);
    expect(a).toBeLessThan(WRITERS * WRITES);
  });
});

describe('crash recovery', () => {
  let locks: LockService;
  beforeAll(() => (locks = services.create({ ttl: 1_000 })));

  /** A worker (ttl 1 s) takes `key` in `mode` and is SIGKILLed; resolves when it is dead. */
  async function crashHolding(key: string, mode: 'read' | 'write'): Promise<void> {
    const worker = spawn({ TTL: '1000' });
    await worker.waitForOutput(/^ready$/m);
    worker.send(`hold ${key} ${mode}`);
    await worker.waitForOutput(new RegExp(`^held ${key}$`, 'm'));
    worker.kill('SIGKILL');
    await worker.exited;
  }

  it("frees a SIGKILLed reader's share within its ttl", async () => {
    await crashHolding('crash-reader', 'read');
    expect(await locks.tryAcquire('crash-reader')).toBeNull();
    const started = now();
    const writer = await locks.acquire('crash-reader', { wait: 5_000 });
    expect(now() - started).toBeLessThan(2_500);
    await writer.release();
  });

  it("frees a SIGKILLed writer's key within its ttl", async () => {
    await crashHolding('crash-writer', 'write');
    expect(await locks.tryAcquire('crash-writer', { mode: 'read' })).toBeNull();
    const started = now();
    const reader = await locks.acquire('crash-writer', { mode: 'read', wait: 5_000 });
    expect(now() - started).toBeLessThan(2_500);
    await reader.release();
  });

  it('lets every worker exit cleanly', async () => {
    for (const w of [...writers, ...readers]) w.end();
    await Promise.all([...writers, ...readers].map((w) => w.succeeded()));
  });
});
