/**
 * Exclusion across lock kinds on ONE lock name, checked across separate Node processes: two take
 * the name as a mutex (`withLock`), two as readers of a read-write lock, two as permit holders of
 * a semaphore of PERMITS permits. Every section counts itself in and out of a Redis monitor
 * (test/fixtures/cross-kind-worker.ts), which counts, per pair of kinds, the entries that found
 * the other kind inside.
 *
 * A mutex holder is a writer: nobody — no other mutex holder, no reader, no permit holder — may
 * be inside while it is. Readers share with readers and permits with permits (checked too, to show
 * the locked run did run its processes side by side). Readers and permit holders exclude each
 * other too: every kind on a name holds one Redis key. The control run takes no lock at all and must see every pair overlap,
 * so each check above can fail.
 */
import { killAllWorkers, spawnWorker, type Worker } from './support/processes';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from './support/shared-redis';
import { uniquePrefix } from './support/unique-prefix';

const PER_KIND = 2;
const ITERATIONS = 40;
const PERMITS = 2;
/** An acquire's wait budget; a worker refused after it crashes loudly, failing its run. */
const WAIT = 10_000;
/** How long one run may take, all processes together. */
const RUN_BUDGET = 15_000;

const KINDS = ['mutex', 'reader', 'permit'] as const;
type Kind = (typeof KINDS)[number];
/** The monitor's counts of entries that found another section inside, by pair of kinds. */
type Overlaps = Record<`${Kind}-${Kind}`, number>;

const prefix = uniquePrefix('xkind-fuzz');
const redis = redisClient();
let workers: Worker[] = [];

beforeAll(async () => {
  workers = KINDS.flatMap((kind) =>
    Array.from({ length: PER_KIND }, () =>
      spawnWorker('test/fixtures/cross-kind-worker.ts', {
        REDIS_URL: SHARED_REDIS_URL,
        PREFIX: prefix,
        KIND: kind,
        ITERATIONS: String(ITERATIONS),
        PERMITS: String(PERMITS),
        WAIT: String(WAIT),
      }),
    ),
  );
  await Promise.all(workers.map((worker) => worker.waitForOutput(/^ready$/m)));
}, 25_000);

afterAll(async () => {
  await killAllWorkers();
  await deleteKeys(redis, prefix);
  await redis.quit();
});

/** Starts one run in every worker at once; resolves the monitor's overlap counts. */
async function race(name: string, mode: 'lock' | 'nolock'): Promise<Overlaps> {
  for (const worker of workers) worker.send(`run ${name} ${mode}`);
  const done = new RegExp(`^done ${name}$`, 'm');
  await Promise.all(workers.map((worker) => worker.waitForOutput(done, RUN_BUDGET)));
  // Every section that entered also left: the counts below cover whole sections.
  const inside = await redis.hgetall(`${prefix}${name}:inside`);
  expect(inside).toEqual({ mutex: '0', reader: '0', permit: '0' });
  const counted = await redis.hgetall(`${prefix}${name}:overlaps`);
  const overlaps = {} as Overlaps;
  KINDS.forEach((first, i) => {
    for (const second of KINDS.slice(i)) {
      overlaps[`${first}-${second}`] = Number(counted[`${first}-${second}`] ?? 0);
    }
  });
  return overlaps;
}

const SETUP = `${PER_KIND} processes per kind × ${ITERATIONS} sections, ${PERMITS} permits`;

describe(`one lock name taken as a mutex, a read share and a permit (${SETUP})`, () => {
  let locked: Overlaps;
  beforeAll(async () => {
    locked = await race('locked', 'lock');
  }, RUN_BUDGET + 5_000);

  it('never lets two mutex holders in at once', () => {
    expect(locked).toMatchObject({ 'mutex-mutex': 0 });
  });

  it('never lets a reader in while a mutex holder is inside', () => {
    expect(locked).toMatchObject({ 'mutex-reader': 0 });
  });

  it('never lets a permit holder in while a mutex holder is inside', () => {
    expect(locked).toMatchObject({ 'mutex-permit': 0 });
  });

  it('lets readers share and permits share, so the processes did run side by side', () => {
    expect(locked['reader-reader']).toBeGreaterThan(0);
    expect(locked['permit-permit']).toBeGreaterThan(0);
  });

  it('never lets a reader and a permit holder in at once (kinds on one name exclude)', () => {
    expect(locked).toMatchObject({ 'reader-permit': 0 });
  });
});

describe(`the same processes without locks (control, ${SETUP})`, () => {
  let control: Overlaps;
  beforeAll(async () => {
    control = await race('control', 'nolock');
  }, RUN_BUDGET + 5_000);

  it.each(['mutex-mutex', 'mutex-reader', 'mutex-permit', 'reader-permit'] as const)(
    'sees %s overlaps, so the check of that pair can fail',
    (pair) => {
      expect(control[pair]).toBeGreaterThan(0);
    },
  );
});

describe('the workers', () => {
  it('all exit cleanly', async () => {
    for (const worker of workers) worker.end();
    await Promise.all(workers.map((worker) => worker.succeeded()));
  });
});
