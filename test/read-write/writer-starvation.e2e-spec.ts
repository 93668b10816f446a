/**
 * A writer under a continuous load of overlapping readers: with writer priority it holds back new
 * readers while it waits and gets in within its budget; the control run, with
 * `writerPriority: false`, shows the starvation that priority prevents — the readers' shares
 * always overlap, so the key is never free of readers and the writer's budget runs out.
 */
import { LockNotAcquiredError } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';
import { now, sleep } from '../support/time';

const { services } = onSharedRedis('rw-starve');
const HOLD_MS = 60;
const READER_LOOPS = 4;

/**
 * Reader loops that keep the key read-locked: each takes its next share before it lets go of its
 * last one, so the shares always overlap, however a loaded machine bunches the loops' timers up
 * (taken after the release, one late tick lined the loops up, and the key was free between their
 * shares). A share refused because a writer with priority waits: the loop lets go, then queues.
 */
function readerLoad(key: string) {
  let running = true;
  let reads = 0;
  const loops = Array.from({ length: READER_LOOPS }, async (_, i) => {
    const locks = services.create({ ttl: 2_000 });
    await sleep((i * HOLD_MS) / READER_LOOPS);
    let held = await locks.acquire(key, { mode: 'read', wait: 10_000 });
    reads++;
    while (running) {
      await sleep(HOLD_MS);
      const next = await locks.tryAcquire(key, { mode: 'read' });
      await held.release();
      held = next ?? (await locks.acquire(key, { mode: 'read', wait: 10_000 }));
      reads++;
    }
    await held.release();
  });
  return {
    get reads() {
      return reads;
    },
    stop: async () => {
      running = false;
      await Promise.all(loops);
    },
  };
}

it('gets a writer in within its budget with writer priority, and starves it without', async () => {
  const writers = services.create({ ttl: 2_000 });
  const load = readerLoad('hot-doc');
  try {
    await sleep(200); // the load is running

    // Control: the writer waits for a moment without readers, which never comes.
    const readsBefore = load.reads;
    const starved = writers.acquire('hot-doc', { wait: 1_500, writerPriority: false });
    await expect(starved).rejects.toBeInstanceOf(LockNotAcquiredError);
    // The readers kept coming all along.
    expect(load.reads - readsBefore).toBeGreaterThan(20);

    // With priority, new readers wait behind it and the ones in drain within one hold.
    const started = now();
    const writer = await writers.acquire('hot-doc', { wait: 3_000 });
    const waited = now() - started;
    await writer.release();
    expect(waited).toBeLessThan(1_500); // less than the budget the control run used up in vain
  } finally {
    await load.stop();
  }
});
