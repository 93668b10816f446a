/**
 * The sample shop, end to end: three replicas (separate processes) behind one Redis.
 *
 * - Vouchers: 300 concurrent orders for a voucher with less stock than buyers. With the locks
 *   every user gets at most one order and exactly the stock is sold.
 * - Credit transfers (`POST /transfers` under `@Locked(['wallet:<body.from>', 'wallet:<body.to>'])`):
 *   concurrent transfers between three users in both directions. With the lock every balance is
 *   what the transfers that succeeded add up to, and the total is conserved.
 *
 * The same bursts on replicas started with LOCKS=off must oversell or duplicate, and lose
 * updates: proof that the first halves can fail. Both scenarios run on one fleet of each kind,
 * since starting a replica (Nest, OpenTelemetry, terminus) is the slow part.
 */
import { LockService } from 'nestjs-redis-lock';
import {
  fireBurst,
  readVoucher,
  resetVoucher,
  summarize,
  type Attempt,
  type BurstSummary,
} from '../../sample-app/harness/burst';
import { readLockStats } from '../../sample-app/harness/lock-stats';
import { startFleet, type Fleet } from '../../sample-app/harness/replicas';
import { killAllWorkers } from '../support/processes';
import { startRedis, stopAllRedis, type RedisServer } from '../support/redis-server';
import { deleteKeys, redisClient, SHARED_REDIS_URL } from '../support/shared-redis';
import { sleep, waitFor } from '../support/time';
import { uniquePrefix } from '../support/unique-prefix';

const USERS = 30;
const ATTEMPTS_PER_USER = 10;
const STOCK = 10;
const VOUCHER = 'flash-sale';
const REPLICAS = 3;
const CREDIT_USERS = ['ann', 'bob', 'cy'];
const OPENING = 1_000;
const TRANSFERS = 60;

const redis = redisClient();
afterAll(async () => {
  await killAllWorkers(); // a backstop: each fleet is stopped by its own afterAll
  await stopAllRedis();
  await redis.quit();
});

/** The sum over every series of `name` in a Prometheus text exposition (labels ignored). */
function metricSum(exposition: string, name: string): number | undefined {
  const series = exposition
    .split('\n')
    .filter((line) => line.startsWith(`${name}{`) || line.startsWith(`${name} `))
    .map((line) => Number(line.slice(line.lastIndexOf(' ') + 1)));
  return series.length === 0 ? undefined : series.reduce((sum, value) => sum + value, 0);
}

async function scrape(url: string): Promise<string> {
  const response = await fetch(`${url}/metrics`);
  expect(response.status).toBe(200);
  expect(response.headers.get('content-type')).toContain('text/plain');
  return response.text();
}

/** Starts the fleet, creates the voucher, fires the burst, reads the result. */
async function runBurst(fleet: Fleet): Promise<{ attempts: Attempt[]; summary: BurstSummary }> {
  await resetVoucher(fleet.urls[0]!, VOUCHER, STOCK);
  const attempts = await fireBurst({
    warmUp: false, // cold replicas spread the burst more: a harder case for the control run
    urls: fleet.urls,
    voucherId: VOUCHER,
    users: USERS,
    attemptsPerUser: ATTEMPTS_PER_USER,
  });
  const voucher = await readVoucher(fleet.urls[REPLICAS - 1]!, VOUCHER);
  return { attempts, summary: summarize(attempts, voucher, REPLICAS) };
}

interface TransferBurst {
  /** Each user's balance as the transfers answered 200 add up to. */
  ledger: Record<string, number>;
  balances: Record<string, number>;
  statuses: number[];
  busy: number;
}

/** Sets every user's credit, fires the transfers at once over the replicas, reads the result. */
async function fireTransfers(fleet: Fleet): Promise<TransferBurst> {
  const put = (userId: string) =>
    fetch(`${fleet.urls[0]}/credits/${userId}`, {
      method: 'PUT',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ credit: OPENING }),
    });
  await Promise.all(CREDIT_USERS.map(put));
  const ledger = Object.fromEntries(CREDIT_USERS.map((user) => [user, OPENING]));
  const responses = await Promise.all(
    Array.from({ length: TRANSFERS }, async (_, i) => {
      // ann → bob, bob → cy, cy → ann, and every pair the other way round as well.
      const a = CREDIT_USERS[i % 3]!;
      const b = CREDIT_USERS[(i + 1) % 3]!;
      const [from, to] = i % 2 ? [a, b] : [b, a];
      const amount = 1 + (i % 5);
      const response = await fetch(`${fleet.urls[i % fleet.urls.length]}/transfers`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ from, to, amount }),
      });
      const body = (await response.json()) as { reason?: string };
      if (response.status === 200) {
        ledger[from]! -= amount;
        ledger[to]! += amount;
      }
      return { status: response.status, busy: body.reason === 'busy' };
    }),
  );
  const balances: Record<string, number> = {};
  for (const user of CREDIT_USERS) {
    const response = await fetch(`${fleet.urls[1]}/credits/${user}`);
    balances[user] = ((await response.json()) as { credit: number }).credit;
  }
  return {
    ledger,
    balances,
    statuses: responses.map((r) => r.status),
    busy: responses.filter((r) => r.busy).length,
  };
}

const totalOf = (balances: Record<string, number>) =>
  Object.values(balances).reduce((sum, value) => sum + value, 0);

describe('voucher shop on 3 replicas with locks', () => {
  const prefix = uniquePrefix('sample-shop');
  let fleet: Fleet | undefined;
  let attempts: Attempt[] = [];
  let summary: BurstSummary;

  beforeAll(async () => {
    fleet = await startFleet({ redisUrl: SHARED_REDIS_URL, prefix, locks: true });
    ({ attempts, summary } = await runBurst(fleet));
  });

  afterAll(async () => {
    await fleet?.stop();
    await deleteKeys(redis, prefix);
  });

  it('fires 300 orders of 30 users, spread over all three replicas', () => {
    expect(summary.requests).toBe(USERS * ATTEMPTS_PER_USER);
    expect(summary.users).toBe(USERS);
    for (let replica = 0; replica < REPLICAS; replica++) {
      expect(attempts.filter((a) => a.replica === replica)).toHaveLength(
        (USERS * ATTEMPTS_PER_USER) / REPLICAS,
      );
    }
  });

  it('gives each user at most one order', () => {
    expect(summary.maxOrdersPerUser).toBe(1);
    expect(summary.duplicates).toBe(0);
  });

  it('sells exactly min(stock, users) units and never takes the stock below 0', () => {
    expect(summary.orders).toBe(Math.min(STOCK, USERS));
    expect(summary.byStatus[201]).toBe(Math.min(STOCK, USERS));
    expect(summary.oversold).toBe(0);
    expect(summary.stockLeft).toBe(STOCK - summary.orders);
    expect(summary.stockLeft).toBeGreaterThanOrEqual(0);
  });

  it('answers every other attempt with 409 (already ordered, or busy with Retry-After) or 410 (sold out)', () => {
    const refused = attempts.filter((a) => a.status !== 201);
    expect(refused).toHaveLength(USERS * ATTEMPTS_PER_USER - summary.orders);
    for (const attempt of refused) {
      const body = attempt.body as { statusCode: number; reason: string; message: string };
      expect(body.statusCode).toBe(attempt.status);
      expect(typeof body.message).toBe('string');
      if (attempt.status === 409) {
        expect(['already-ordered', 'busy']).toContain(body.reason);
        if (body.reason === 'busy') {
          expect(attempt.retryAfter).toBe('1');
          // The lock's key (`order:<userId>` or `stock:<voucher>`) stays in the server's log.
          expect(body).toEqual({
            statusCode: 409,
            error: 'Conflict',
            reason: 'busy',
            message:
              'A request for the same thing is already being handled. Try again in a second.',
          });
        }
      } else {
        expect(attempt.status).toBe(410);
        expect(body).toMatchObject({
          reason: 'sold-out',
          message: `Voucher "${VOUCHER}" is sold out.`,
        });
      }
    }
    expect(summary.byStatus[409]).toBeGreaterThan(0);
    expect(summary.byStatus[410]).toBeGreaterThan(0);
  });

  it('never answers 5xx, and every request got an answer', () => {
    expect(attempts.filter((a) => a.status === 0 || a.status >= 500)).toEqual([]);
  });

  it('settles every order exactly once although the cron job fires on every replica', async () => {
    await waitFor(
      async () => (await readVoucher(fleet!.urls[0]!, VOUCHER)).settled >= summary.orders,
      5_000,
      100,
    );
    await sleep(1_200); // one more tick on every replica: nothing may be booked twice
    expect((await readVoucher(fleet!.urls[0]!, VOUCHER)).settled).toBe(summary.orders);
  });

  it('answers the @Locked settlement route with 409 + Retry-After while another holder runs settlement', async () => {
    const operator = new LockService({ redis: SHARED_REDIS_URL, prefix: `${prefix}lock:` });
    try {
      const held = await operator.acquire('settlement', { wait: 3_000 });
      const busy = await fetch(`${fleet!.urls[1]}/settlements`, { method: 'POST' });
      expect(busy.status).toBe(409);
      expect(busy.headers.get('retry-after')).toBe('1');
      expect(await busy.json()).toEqual({
        statusCode: 409,
        error: 'Conflict',
        reason: 'busy',
        message: 'A request for the same thing is already being handled. Try again in a second.',
      });
      await held.release();

      // Free: the route holds the lock and the @Locked cron method re-uses it (re-entrant). The
      // cron job holds the lock for its 300 ms minimum at each tick: retry a 409 then, as a
      // client would.
      let ran = await fetch(`${fleet!.urls[1]}/settlements`, { method: 'POST' });
      for (let retry = 0; ran.status === 409 && retry < 30; retry++) {
        await sleep(50);
        ran = await fetch(`${fleet!.urls[1]}/settlements`, { method: 'POST' });
      }
      expect(ran.status).toBe(200);
      expect(await ran.json()).toMatchObject({ replica: 'replica-2', booked: {} });
    } finally {
      await operator.close();
    }
  });

  it('exposes the lock metrics of each replica at GET /metrics, in the Prometheus text format', async () => {
    const expositions = await Promise.all(fleet!.urls.map(scrape));
    const total = (name: string) =>
      expositions.reduce((sum, text) => sum + (metricSum(text, name) ?? 0), 0);
    for (const text of expositions) {
      // Every replica took locks: its order and stock locks, and the settlement job's.
      expect(metricSum(text, 'lock_acquired_total')).toBeGreaterThan(0);
      expect(text).toContain('# TYPE lock_acquire_duration histogram');
      expect(text).toMatch(/^lock_held\{lock_mode="default"/m);
    }
    // Each order sold took an order lock and a stock lock; each 409 busy was a busy acquire.
    expect(total('lock_acquired_total')).toBeGreaterThanOrEqual(2 * summary.orders);
    expect(total('lock_busy_total')).toBeGreaterThanOrEqual(summary.byReason.busy ?? 0);
    expect(total('lock_busy_total')).toBeGreaterThan(0);
    expect(total('lock_hold_duration_count')).toBeGreaterThan(0);
    expect(total('lock_lost_total')).toBe(0);
  });

  it('answers GET /health through terminus: up, with the locks details', async () => {
    const response = await fetch(`${fleet!.urls[0]}/health`);
    expect(response.status).toBe(200);
    expect(await response.json()).toMatchObject({
      status: 'ok',
      info: {
        shop: { status: 'up', replica: 'replica-1', locks: 'on' },
        locks: {
          status: 'up',
          redis: { reachable: true },
          renewals: { running: true, failingInRow: 0 },
          held: expect.any(Number),
        },
      },
      error: {},
    });
  });

  it("counts each replica's lock events at GET /lock-stats: a busy event behind every 409 busy", async () => {
    const stats = await Promise.all(fleet!.urls.map(readLockStats));
    const sum = (family: string, field: 'acquired' | 'busy') =>
      stats.reduce((total, replica) => total + (replica[family]?.[field] ?? 0), 0);
    expect(sum('order', 'busy') + sum('stock', 'busy')).toBe(summary.byReason.busy ?? 0);
    expect(sum('stock', 'acquired')).toBeGreaterThanOrEqual(summary.orders);
    for (const replica of stats) {
      expect(replica.order!.waitP99Ms).toBeGreaterThanOrEqual(replica.order!.waitP50Ms);
    }
  });

  describe('credit transfers under the multi-key lock', () => {
    let burst: TransferBurst;

    beforeAll(async () => {
      burst = await fireTransfers(fleet!);
    }, 90_000);

    it('answers every transfer 200, or 409 busy after waiting its 5 s, never anything else', () => {
      const other = burst.statuses.filter((status) => status !== 200 && status !== 409);
      expect(other).toEqual([]);
      expect(burst.statuses.filter((status) => status === 409)).toHaveLength(burst.busy);
      expect(burst.statuses.filter((status) => status === 200).length).toBeGreaterThan(0);
    });

    it('conserves the total, and each balance is what its transfers add up to', () => {
      expect(totalOf(burst.balances)).toBe(CREDIT_USERS.length * OPENING);
      expect(burst.balances).toEqual(burst.ledger);
    });
  });

  // Last: it stops the fleet every test above uses.
  it('shuts down gracefully on SIGTERM, closing its Redis connections', async () => {
    await fleet!.stop();
    for (const replica of fleet!.replicas) {
      const exit = await replica.worker.exited;
      // Nest runs the shutdown hooks, then re-raises the signal it caught.
      expect(exit).toMatchObject({ signal: 'SIGTERM' });
      expect(exit.stdout).toContain('Redis connection closed');
    }
  });
});

describe('control: the same bursts with LOCKS=off', () => {
  const prefix = uniquePrefix('sample-shop-nolock');
  let fleet: Fleet | undefined;

  afterAll(async () => {
    await fleet?.stop();
    await deleteKeys(redis, prefix);
  });

  it('sells duplicate orders or more than the stock — the race the locks prevent', async () => {
    fleet = await startFleet({ redisUrl: SHARED_REDIS_URL, prefix, locks: false });
    const { attempts, summary } = await runBurst(fleet);
    expect(summary.duplicates + summary.oversold).toBeGreaterThan(0);
    expect(attempts.filter((a) => a.status === 0 || a.status >= 500)).toEqual([]);
  });

  it('answers GET /health without a locks entry (no LockService), and records no lock metrics', async () => {
    const health = await fetch(`${fleet!.urls[0]}/health`);
    expect(health.status).toBe(200);
    const body = (await health.json()) as { info: Record<string, unknown> };
    expect(body.info).toEqual({
      shop: { status: 'up', replica: 'replica-1-nolock', locks: 'off' },
    });
    expect(metricSum(await scrape(fleet!.urls[0]!), 'lock_acquired_total')).toBeUndefined();
  });

  it('loses credit updates: the balances are not what the transfers add up to', async () => {
    const burst = await fireTransfers(fleet!);
    expect(burst.statuses.every((status) => status === 200)).toBe(true);
    expect(burst.balances).not.toEqual(burst.ledger);
  }, 90_000);
});

describe('voucher shop health with its Redis paused', () => {
  let server: RedisServer | undefined;
  let fleet: Fleet | undefined;

  afterAll(async () => {
    server?.resume();
    await fleet?.stop();
    await server?.stop();
  });

  it('answers GET /health with 503 and the reason while Redis does not answer, 200 again after', async () => {
    // A private redis-server: pausing the shared one would stall every other suite.
    server = await startRedis();
    fleet = await startFleet({
      redisUrl: server.url,
      prefix: uniquePrefix('sample-shop-down'),
      locks: true,
      count: 1,
      env: { SETTLEMENT: 'off' },
    });
    const url = `${fleet.urls[0]}/health`;
    expect((await fetch(url)).status).toBe(200);

    server.pause();
    const down = await fetch(url);
    expect(down.status).toBe(503);
    const body = (await down.json()) as {
      status: string;
      error: { locks: { status: string; redis: { reachable: boolean }; reasons: string[] } };
    };
    expect(body.status).toBe('error');
    expect(body.error.locks).toMatchObject({ status: 'down', redis: { reachable: false } });
    expect(body.error.locks.reasons.join(' ')).toContain('Redis is unreachable');

    server.resume();
    await waitFor(async () => (await fetch(url)).status === 200, 10_000, 200);
  });
});
