/**
 * The examples of docs/read-write.md, run as written (with a small in-memory document store):
 * keep the two in step.
 */
import { LockUpgradeError } from 'nestjs-redis-lock';
import { onSharedRedis } from '../support/lock-services';

const { services } = onSharedRedis('docs-rw');
const locks = services.create();

/** The documents of the examples, with the fence of the write that saved each. */
const docs = {
  saved: new Map<string, { body: string; fence?: number }>(),
  async load(id: string) {
    return this.saved.get(id);
  },
  async save(id: string, body: string, options: { fence?: number } = {}) {
    this.saved.set(id, { body, fence: options.fence });
  },
};
const body = 'hello';
const rendered: unknown[] = [];
const render = (doc: unknown) => void rendered.push(doc);

it('takes a read share, and the key alone for a write (the first example)', async () => {
  await locks.withLock('doc:7', async (lock) => docs.save('7', body, { fence: lock.fence }));

  const lock = await locks.acquire('doc:7', { mode: 'read' });
  try {
    render(await docs.load('7'));
  } finally {
    await lock.release();
  }
  expect(rendered).toEqual([{ body, fence: lock.fence }]); // the reader's fence: the last write's
});

it('joins a write with a nested read, and refuses a write nested in a read (re-entrancy)', async () => {
  await locks.withLock('doc:7', async () => {
    await locks.withLock('doc:7', () => docs.load('7'), { mode: 'read' }); // joins the write
  });

  await expect(
    locks.withLock(
      'doc:7',
      async () => {
        await locks.withLock('doc:7', () => docs.save('7', body)); // LockUpgradeError
      },
      { mode: 'read' },
    ),
  ).rejects.toBeInstanceOf(LockUpgradeError);
});
